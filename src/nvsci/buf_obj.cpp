// NvSciBuf objects: allocation from a reconciled list, duplicates sharing one allocation, CPU pointers.
#include <cstdlib>
#include <cstring>

#include "buf_state.h"

using namespace softdla::nvsci;

namespace softdla::nvsci {
BufMemory::~BufMemory() { std::free(data); }
}  // namespace softdla::nvsci

namespace {

constexpr uint64_t kMaxBufferBytes = uint64_t(16) << 30;  // beyond this, InsufficientMemory (NVSCI.md)

template <typename T>
bool get_value(const BufAttrList& l, uint32_t key, T* out) {
  auto it = l.values.find(key);
  if (it == l.values.end() || it->second.size() != sizeof(T)) return false;
  std::memcpy(out, it->second.data(), sizeof(T));
  return true;
}

}  // namespace

extern "C" NvSciError NvSciBufObjAlloc(NvSciBufAttrList reconciledAttrList, NvSciBufObj* bufObj) {
  if (!bufObj) return NvSciError_BadParameter;
  auto list = buf_lists().find(reconciledAttrList);
  if (!list || list->kind != ListKind::Reconciled) return NvSciError_BadParameter;
  uint64_t size = 0, align = 1;
  if (!get_value(*list, NvSciBufTensorAttrKey_Size, &size)) get_value(*list, NvSciBufRawBufferAttrKey_Size, &size);
  if (!get_value(*list, NvSciBufTensorAttrKey_BaseAddrAlign, &align))
    get_value(*list, NvSciBufRawBufferAttrKey_Align, &align);
  if (size == 0) return NvSciError_BadParameter;
  if (size > kMaxBufferBytes || align > (uint64_t(1) << 30)) return NvSciError_InsufficientMemory;
  if (align < 256) align = 256;  // the DLA's own address alignment
  auto mem = std::make_shared<BufMemory>();
  uint64_t padded = (size + align - 1) & ~(align - 1);
  mem->data = static_cast<uint8_t*>(std::aligned_alloc(align, padded));
  if (!mem->data) return NvSciError_InsufficientMemory;
  std::memset(mem->data, 0, padded);
  mem->size = size;
  NvSciBufAttrValAccessPerm perm = NvSciBufAccessPerm_Readonly;
  get_value(*list, NvSciBufGeneralAttrKey_ActualPerm, &perm);
  mem->writable = perm == NvSciBufAccessPerm_ReadWrite;
  bool cpu = false;
  get_value(*list, NvSciBufGeneralAttrKey_NeedCpuAccess, &cpu);
  mem->cpu_access = cpu;
  mem->attrs = list;
  auto obj = std::make_shared<BufObj>();
  obj->memory = std::move(mem);
  *bufObj = to_handle<NvSciBufObj>(buf_objects().add(std::move(obj)));
  return NvSciError_Success;
}

extern "C" NvSciError NvSciBufObjDup(NvSciBufObj bufObj, NvSciBufObj* dupObj) {
  auto obj = buf_objects().find(bufObj);
  if (!obj || !dupObj) return NvSciError_BadParameter;
  auto dup = std::make_shared<BufObj>();
  dup->memory = obj->memory;
  *dupObj = to_handle<NvSciBufObj>(buf_objects().add(std::move(dup)));
  return NvSciError_Success;
}

// The memory is released when the last handle to it is freed.
extern "C" void NvSciBufObjFree(NvSciBufObj bufObj) {
  auto obj = buf_objects().remove(bufObj);
  if (!obj) return;
  std::lock_guard<std::mutex> lock(obj->mutex);
  if (obj->attr_handle) buf_lists().remove(reinterpret_cast<const void*>(obj->attr_handle));
}

// The object's reconciled list; it belongs to the object (freed with it), as in NVIDIA's NvSciBuf.
extern "C" NvSciError NvSciBufObjGetAttrList(NvSciBufObj bufObj, NvSciBufAttrList* bufAttrList) {
  auto obj = buf_objects().find(bufObj);
  if (!obj || !bufAttrList) return NvSciError_BadParameter;
  std::lock_guard<std::mutex> lock(obj->mutex);
  if (!obj->attr_handle || !buf_lists().find(reinterpret_cast<const void*>(obj->attr_handle)))
    obj->attr_handle = buf_lists().add(std::const_pointer_cast<BufAttrList>(obj->memory->attrs));
  *bufAttrList = to_handle<NvSciBufAttrList>(obj->attr_handle);
  return NvSciError_Success;
}

// Needs NeedCpuAccess and read-write permission in the reconciled list (read access for the const form).
extern "C" NvSciError NvSciBufObjGetCpuPtr(NvSciBufObj bufObj, void** ptr) {
  auto obj = buf_objects().find(bufObj);
  if (!obj || !ptr || !obj->memory->cpu_access || !obj->memory->writable) return NvSciError_BadParameter;
  *ptr = obj->memory->data;
  return NvSciError_Success;
}

extern "C" NvSciError NvSciBufObjGetConstCpuPtr(NvSciBufObj bufObj, const void** ptr) {
  auto obj = buf_objects().find(bufObj);
  if (!obj || !ptr || !obj->memory->cpu_access) return NvSciError_BadParameter;
  *ptr = obj->memory->data;
  return NvSciError_Success;
}

// softdla's hook for libcudla (not an NVIDIA function): the memory behind an object whatever its CPU
// access, as the DLA sees it.
extern "C" NvSciError softdlaNvSciBufObjGetMemory(NvSciBufObj bufObj, void** ptr, uint64_t* size, bool* writable) {
  auto obj = buf_objects().find(bufObj);
  if (!obj || !ptr || !size || !writable) return NvSciError_BadParameter;
  *ptr = obj->memory->data;
  *size = obj->memory->size;
  *writable = obj->memory->writable;
  return NvSciError_Success;
}
