// libcudla's view of NvSciBuf/NvSciSync: the two libraries are opened at run time (dlopen), so
// libcudla.so.1 has no link-time dependency on them and hybrid-only programs never load them
// (docs/NVSCI.md). Functions are looked up by name; a missing library or symbol makes the NvSci entry
// points return cudlaErrorUnsupportedOperation, as NVIDIA's cuDLA does when NvSci cannot be loaded.
#pragma once
#include <string>

#include "nvscibuf.h"
#include "nvscisync.h"

namespace softdla::rt {

struct NvSciApi {
  // libnvscibuf.so.1
  NvSciError (*buf_get_memory)(NvSciBufObj, void**, uint64_t*, bool*);  // softdla's hook
  NvSciError (*buf_obj_dup)(NvSciBufObj, NvSciBufObj*);
  void (*buf_obj_free)(NvSciBufObj);
  NvSciError (*buf_obj_get_attr_list)(NvSciBufObj, NvSciBufAttrList*);
  NvSciError (*buf_attr_get)(NvSciBufAttrList, NvSciBufAttrKeyValuePair*, size_t);
  // libnvscisync.so.1
  NvSciError (*sync_attr_set)(NvSciSyncAttrList, const NvSciSyncAttrKeyValuePair*, size_t);
  NvSciError (*sync_obj_dup)(NvSciSyncObj, NvSciSyncObj*);
  void (*sync_obj_free)(NvSciSyncObj);
  NvSciError (*sync_generate_fence)(NvSciSyncObj, NvSciSyncFence*);
  NvSciError (*sync_signal)(NvSciSyncObj);
  NvSciError (*sync_fence_dup)(const NvSciSyncFence*, NvSciSyncFence*);
  NvSciError (*sync_fence_wait)(const NvSciSyncFence*, NvSciSyncCpuWaitContext, int64_t);
  NvSciSyncCpuWaitContext wait_context;  // libcudla's own, for waiting on pre-fences
};

// The loaded API, or null with `why` set when the libraries or a symbol are missing.
const NvSciApi* nvsci(std::string* why = nullptr);

}  // namespace softdla::rt
