// The NvSci entry points of standalone mode: NvSciBuf objects imported as DLA memory, NvSciSync objects
// imported as semaphores tasks signal, cuDLA's NvSciSync attributes. The NvSci libraries are opened at
// run time (nvsci_loader.h); without them these return cudlaErrorUnsupportedOperation, as NVIDIA's
// cuDLA does when NvSci cannot be loaded (after the argument checks, so misuse is still reported).
// docs/RUNTIME.md, docs/NVSCI.md.
#include "cudla.h"
#include "guard.h"
#include "nvsci_loader.h"
#include "runtime_state.h"
#include "standalone_queue.h"

using namespace softdla;
using namespace softdla::rt;

namespace {

const NvSciApi* require_nvsci(const char* fn, cudlaStatus* status) {
  std::string why;
  const NvSciApi* api = nvsci(&why);
  if (!api)
    *status = fail_status(cudlaErrorUnsupportedOperation, fn, "NvSci is not available (", why,
                          "); softdla's libnvscibuf.so.1/libnvscisync.so.1 belong next to libcudla.so.1");
  return api;
}

}  // namespace

extern "C" cudlaStatus cudlaImportExternalMemory(cudlaDevHandle const devHandle,
                                                 const cudlaExternalMemoryHandleDesc* const desc,
                                                 uint64_t** const devPtr, uint32_t const flags) {
  static const char* fn = "cudlaImportExternalMemory";
  return guarded(fn, [&] {
    const auto dev = find_device(devHandle);
    if (!dev) return fail_status(cudlaErrorInvalidDevice, fn, "not a live device handle");
    if (!desc || !devPtr || !desc->extBufObject)
      return fail_status(cudlaErrorInvalidParam, fn, "desc, desc->extBufObject and devPtr must be set");
    if (flags > CUDLA_TASK_STATISTICS)
      return fail_status(cudlaErrorInvalidParam, fn, "unknown flags ", flags);
    if (dev->mode != CUDLA_STANDALONE)
      return fail_status(cudlaErrorUnsupportedOperation, fn,
                         "hybrid handles register memory with cudlaMemRegister; NvSci imports are for CUDLA_STANDALONE");
    cudlaStatus status = cudlaSuccess;
    const NvSciApi* api = require_nvsci(fn, &status);
    if (!api) return status;
    auto source = static_cast<NvSciBufObj>(const_cast<void*>(desc->extBufObject));
    NvSciBufObj dup = nullptr;
    if (api->buf_obj_dup(source, &dup) != NvSciError_Success)
      return fail_status(cudlaErrorNvSci, fn, "extBufObject ", desc->extBufObject, " is not a live NvSciBufObj");
    std::shared_ptr<void> keep(dup, [api](void* o) { api->buf_obj_free(static_cast<NvSciBufObj>(o)); });
    void* data = nullptr;
    uint64_t size = 0;
    bool writable = false;
    if (api->buf_get_memory(dup, &data, &size, &writable) != NvSciError_Success)
      return fail_status(cudlaErrorNvSci, fn, "could not read the NvSciBufObj's memory");
    if (desc->size == 0 || desc->size > size)
      return fail_status(cudlaErrorInvalidParam, fn, "desc->size ", desc->size, " is 0 or larger than the NvSciBuf object (",
                         size, " bytes)");
    if (reinterpret_cast<uintptr_t>(data) % 32)
      return fail_status(cudlaErrorInvalidAttribute, fn, "the buffer is not 32-byte aligned");
    if (flags == CUDLA_READ_WRITE_PERM && !writable)
      return fail_status(cudlaErrorInvalidAttribute, fn,
                         "the NvSciBuf object is read-only; import it with CUDLA_READ_ONLY_PERM or reconcile with "
                         "NvSciBufAccessPerm_ReadWrite");
    std::lock_guard<std::mutex> lock(dev->state_mutex);
    if (!dev->alive) return fail_status(cudlaErrorInvalidDevice, fn, "device handle was destroyed");
    for (const auto& [addr, region] : dev->regions)
      if (region.base == data && !region.semaphore)
        return fail_status(cudlaErrorMemoryRegistered, fn, "this NvSciBuf memory is already imported on this handle");
    const uint64_t addr = allocate_dla_range(desc->size);
    if (addr == 0) return fail_status(cudlaErrorOutOfResources, fn, "the DLA address space is exhausted");
    Region r;
    r.base = static_cast<const uint8_t*>(data);
    r.size = desc->size;
    r.flags = flags;  // CUDLA_READ_ONLY_PERM: no task may write it (resolve_task); CUDLA_TASK_STATISTICS
    r.keep = std::move(keep);
    dev->regions[addr] = std::move(r);
    *devPtr = reinterpret_cast<uint64_t*>(addr);
    return cudlaSuccess;
  });
}

// cuDLA's needs for a sync object: CPU access (softdla's DLA is a CPU thread) and wait and/or signal
// permission. (The permission mapping is the natural one; docs/NVSCI.md explains why.)
extern "C" cudlaStatus cudlaGetNvSciSyncAttributes(uint64_t* attrList, uint32_t const flags) {
  static const char* fn = "cudlaGetNvSciSyncAttributes";
  return guarded(fn, [&] {
    if (!attrList) return fail_status(cudlaErrorInvalidParam, fn, "attrList is NULL");
    if (flags == 0 || (flags & ~uint32_t(CUDLA_NVSCISYNC_ATTR_WAIT | CUDLA_NVSCISYNC_ATTR_SIGNAL)))
      return fail_status(cudlaErrorInvalidParam, fn, "flags must combine CUDLA_NVSCISYNC_ATTR_WAIT/SIGNAL, got ", flags);
    cudlaStatus status = cudlaSuccess;
    const NvSciApi* api = require_nvsci(fn, &status);
    if (!api) return status;
    const bool wait = flags & CUDLA_NVSCISYNC_ATTR_WAIT, signal = flags & CUDLA_NVSCISYNC_ATTR_SIGNAL;
    const NvSciSyncAccessPerm perm = wait && signal ? NvSciSyncAccessPerm_WaitSignal
                                     : wait         ? NvSciSyncAccessPerm_WaitOnly
                                                    : NvSciSyncAccessPerm_SignalOnly;
    const bool cpu = true;
    const NvSciSyncAttrKeyValuePair kv[] = {{NvSciSyncAttrKey_NeedCpuAccess, &cpu, sizeof(cpu)},
                                            {NvSciSyncAttrKey_RequiredPerm, &perm, sizeof(perm)}};
    const NvSciError e = api->sync_attr_set(reinterpret_cast<NvSciSyncAttrList>(attrList), kv, 2);
    if (e != NvSciError_Success)
      return fail_status(cudlaErrorNvSci, fn, "NvSciSyncAttrListSetAttrs failed (NvSciError ", int(e),
                         "): not a live unreconciled NvSciSyncAttrList, or its permission/CPU access is already set");
    return cudlaSuccess;
  });
}

extern "C" cudlaStatus cudlaImportExternalSemaphore(cudlaDevHandle const devHandle,
                                                    const cudlaExternalSemaphoreHandleDesc* const desc,
                                                    uint64_t** const devPtr, uint32_t const flags) {
  static const char* fn = "cudlaImportExternalSemaphore";
  return guarded(fn, [&] {
    const auto dev = find_device(devHandle);
    if (!dev) return fail_status(cudlaErrorInvalidDevice, fn, "not a live device handle");
    if (!desc || !devPtr || !desc->extSyncObject)
      return fail_status(cudlaErrorInvalidParam, fn, "desc, desc->extSyncObject and devPtr must be set");
    if (flags != 0) return fail_status(cudlaErrorInvalidParam, fn, "flags are reserved and must be 0");
    if (dev->mode != CUDLA_STANDALONE)
      return fail_status(cudlaErrorUnsupportedOperation, fn, "NvSciSync imports are for CUDLA_STANDALONE handles");
    cudlaStatus status = cudlaSuccess;
    const NvSciApi* api = require_nvsci(fn, &status);
    if (!api) return status;
    auto sem = std::make_shared<ImportedSemaphore>();
    auto source = static_cast<NvSciSyncObj>(const_cast<void*>(desc->extSyncObject));
    if (api->sync_obj_dup(source, &sem->object) != NvSciError_Success)
      return fail_status(cudlaErrorNvSci, fn, "extSyncObject ", desc->extSyncObject, " is not a live NvSciSyncObj");
    std::lock_guard<std::mutex> lock(dev->state_mutex);
    if (!dev->alive) return fail_status(cudlaErrorInvalidDevice, fn, "device handle was destroyed");
    const auto* key = static_cast<const uint8_t*>(desc->extSyncObject);
    for (const auto& [addr, region] : dev->regions)
      if (region.semaphore && region.base == key)
        return fail_status(cudlaErrorMemoryRegistered, fn, "this NvSciSyncObj is already imported on this handle");
    const uint64_t addr = allocate_dla_range(8);
    if (addr == 0) return fail_status(cudlaErrorOutOfResources, fn, "the DLA address space is exhausted");
    Region r;
    r.base = key;  // never dereferenced: identifies the import
    r.size = 8;
    r.semaphore = std::move(sem);
    dev->regions[addr] = std::move(r);
    *devPtr = reinterpret_cast<uint64_t*>(addr);
    return cudlaSuccess;
  });
}
