// NvSciBuf's objects behind the handles (buf_*.cpp).
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "handle_table.h"
#include "nvscibuf.h"

namespace softdla::nvsci {

struct BufModule {
  std::atomic<bool> open{true};
};

enum class ListKind { Unreconciled, Reconciled, Conflict };

struct BufAttrList {
  std::shared_ptr<BufModule> module;
  ListKind kind = ListKind::Unreconciled;
  std::mutex mutex;  // guards values of an unreconciled list (reconciled lists never change)
  std::map<uint32_t, std::vector<uint8_t>> values;  // key -> value bytes as set (or computed)
};

// The memory of one allocation; shared by every NvSciBufObj handle duplicated from it.
struct BufMemory {
  ~BufMemory();
  uint8_t* data = nullptr;
  uint64_t size = 0;
  bool writable = true;
  bool cpu_access = false;
  std::shared_ptr<const BufAttrList> attrs;  // the reconciled list it was allocated from
};

struct BufObj {
  std::shared_ptr<BufMemory> memory;
  std::mutex mutex;           // guards attr_handle
  uintptr_t attr_handle = 0;  // NvSciBufObjGetAttrList's list, made on first call, freed with the object
};

HandleTable<BufModule>& buf_modules();
HandleTable<BufAttrList>& buf_lists();
HandleTable<BufObj>& buf_objects();

// The expected value size of a key for NvSciBufAttrListSetAttrs (0: any multiple of elem_size), or -1
// when the key is not one softdla knows. elem_size is the size of one element for array-valued keys.
bool buf_key_shape(uint32_t key, size_t* fixed_len, size_t* elem_size, bool* settable);

}  // namespace softdla::nvsci
