// The NvSci entry points. NvSciBuf/NvSciSync exist only on Tegra; off Tegra NVIDIA's library returns
// cudlaErrorUnsupportedOperation when NvSci cannot be loaded, and so does softdla (after the argument
// checks, so misuse is still reported precisely). docs/RUNTIME.md.
#include "cudla.h"
#include "guard.h"
#include "runtime_state.h"

using namespace softdla;
using namespace softdla::rt;

namespace {
const char* const kNoNvSci = "NvSci (NvSciBuf/NvSciSync) is only available on Tegra; use hybrid mode "
                             "(cudlaMemRegister, stream submission) with softdla";
}

extern "C" cudlaStatus cudlaImportExternalMemory(cudlaDevHandle const devHandle,
                                                 const cudlaExternalMemoryHandleDesc* const desc,
                                                 uint64_t** const devPtr, uint32_t const flags) {
  static const char* fn = "cudlaImportExternalMemory";
  return guarded(fn, [&] {
    if (!find_device(devHandle)) return fail_status(cudlaErrorInvalidDevice, fn, "not a live device handle");
    if (!desc || !devPtr || !desc->extBufObject)
      return fail_status(cudlaErrorInvalidParam, fn, "desc, desc->extBufObject and devPtr must be set");
    if (flags > CUDLA_TASK_STATISTICS)
      return fail_status(cudlaErrorInvalidParam, fn, "unknown flags ", flags);
    return fail_status(cudlaErrorUnsupportedOperation, fn, kNoNvSci);
  });
}

extern "C" cudlaStatus cudlaGetNvSciSyncAttributes(uint64_t* attrList, uint32_t const flags) {
  static const char* fn = "cudlaGetNvSciSyncAttributes";
  return guarded(fn, [&] {
    if (!attrList) return fail_status(cudlaErrorInvalidParam, fn, "attrList is NULL");
    if (flags == 0 || (flags & ~uint32_t(CUDLA_NVSCISYNC_ATTR_WAIT | CUDLA_NVSCISYNC_ATTR_SIGNAL)))
      return fail_status(cudlaErrorInvalidParam, fn, "flags must combine CUDLA_NVSCISYNC_ATTR_WAIT/SIGNAL, got ", flags);
    return fail_status(cudlaErrorUnsupportedOperation, fn, kNoNvSci);
  });
}

extern "C" cudlaStatus cudlaImportExternalSemaphore(cudlaDevHandle const devHandle,
                                                    const cudlaExternalSemaphoreHandleDesc* const desc,
                                                    uint64_t** const devPtr, uint32_t const flags) {
  static const char* fn = "cudlaImportExternalSemaphore";
  return guarded(fn, [&] {
    if (!find_device(devHandle)) return fail_status(cudlaErrorInvalidDevice, fn, "not a live device handle");
    if (!desc || !devPtr || !desc->extSyncObject)
      return fail_status(cudlaErrorInvalidParam, fn, "desc, desc->extSyncObject and devPtr must be set");
    if (flags != 0) return fail_status(cudlaErrorInvalidParam, fn, "flags are reserved and must be 0");
    return fail_status(cudlaErrorUnsupportedOperation, fn, kNoNvSci);
  });
}
