// Registered memory: host buffers mapped to distinct DLA addresses, per handle.
#include "cudla.h"
#include "guard.h"
#include "runtime_state.h"

using namespace softdla;
using namespace softdla::rt;

extern "C" cudlaStatus cudlaMemRegister(cudlaDevHandle const devHandle, const uint64_t* const ptr, size_t const size,
                                        uint64_t** const devPtr, uint32_t const flags) {
  static const char* fn = "cudlaMemRegister";
  return guarded(fn, [&] {
    const auto dev = find_device(devHandle);
    if (!dev) return fail_status(cudlaErrorInvalidDevice, fn, "not a live device handle");
    if (!devPtr) return fail_status(cudlaErrorInvalidParam, fn, "devPtr is NULL");
    if (flags != 0 && flags != CUDLA_TASK_STATISTICS)
      return fail_status(cudlaErrorInvalidParam, fn, "flags must be 0 or CUDLA_TASK_STATISTICS, got ", flags);
    if (dev->mode != CUDLA_CUDA_DLA)
      return fail_status(cudlaErrorUnsupportedOperation, fn,
                         "standalone handles import memory with cudlaImportExternalMemory, not cudlaMemRegister");
    if (!ptr || size == 0) return fail_status(cudlaErrorInvalidAddress, fn, "NULL pointer or zero size");
    if (reinterpret_cast<uintptr_t>(ptr) % 32)
      return fail_status(cudlaErrorInvalidAddress, fn, "pointer ", static_cast<const void*>(ptr),
                         " is not 32-byte aligned (the DLA requires it)");
    std::lock_guard<std::mutex> lock(dev->state_mutex);
    if (!dev->alive) return fail_status(cudlaErrorInvalidDevice, fn, "device handle was destroyed");
    for (const auto& [addr, region] : dev->regions)
      if (region.host == reinterpret_cast<const uint8_t*>(ptr))
        return fail_status(cudlaErrorMemoryRegistered, fn, "pointer ", static_cast<const void*>(ptr),
                           " is already registered on this handle");
    const uint64_t addr = allocate_dla_range(size);
    dev->regions[addr] = {reinterpret_cast<const uint8_t*>(ptr), size, flags};
    *devPtr = reinterpret_cast<uint64_t*>(addr);
    return cudlaSuccess;
  });
}

extern "C" cudlaStatus cudlaMemUnregister(cudlaDevHandle const devHandle, const uint64_t* const devPtr) {
  static const char* fn = "cudlaMemUnregister";
  return guarded(fn, [&] {
    const auto dev = find_device(devHandle);
    if (!dev) return fail_status(cudlaErrorInvalidDevice, fn, "not a live device handle");
    std::lock_guard<std::mutex> lock(dev->state_mutex);
    const auto it = dev->regions.find(reinterpret_cast<uint64_t>(devPtr));
    if (it == dev->regions.end())
      return fail_status(cudlaErrorInvalidAddress, fn, static_cast<const void*>(devPtr),
                         " is not a DLA pointer registered on this handle (pass the pointer cudlaMemRegister "
                         "returned, not the host/CUDA pointer)");
    dev->regions.erase(it);
    return cudlaSuccess;
  });
}
