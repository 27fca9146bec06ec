// Registered memory: buffers mapped to distinct DLA addresses, per handle. With the CUDA backend the
// buffers must be CUDA device memory (as on a Jetson); with the CPU backend on a machine with a GPU
// either kind is taken (device memory is staged through pinned host memory in stream order).
#include "cudla.h"
#include "guard.h"
#include "runtime_state.h"

using namespace softdla;
using namespace softdla::rt;

namespace {
constexpr size_t kMaxBufferBytes = size_t(1) << 57;
}  // namespace

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
    // No buffer is larger than the user address space (2^57 bytes covers x86-64 5-level paging and
    // AArch64 52-bit VA) or wraps past the top of memory: such a size is a wrong argument, and would let
    // tasks read far beyond the real buffer. (Only the size is bounded: AArch64 pointers may carry tags.)
    uintptr_t end = 0;
    if (size > kMaxBufferBytes || __builtin_add_overflow(reinterpret_cast<uintptr_t>(ptr), size, &end))
      return fail_status(cudlaErrorInvalidAddress, fn, "size ", size, " at ", static_cast<const void*>(ptr),
                         " is larger than any buffer can be (it runs past the address space); pass the buffer's "
                         "size in bytes");
    if (reinterpret_cast<uintptr_t>(ptr) % 32)
      return fail_status(cudlaErrorInvalidAddress, fn, "pointer ", static_cast<const void*>(ptr),
                         " is not 32-byte aligned (the DLA requires it)");
    bool device_memory = false;
    if (dev->platform) {
      try {
        device_memory = dev->platform->memory_kind(ptr) == gpu::MemoryKind::kDevice;
      } catch (const std::exception& e) {
        return fail_status(cudlaErrorInvalidAddress, fn, "CUDA does not recognise ", static_cast<const void*>(ptr),
                           ": ", e.what());
      }
      if (dev->gpu_compute && dev->mode == CUDLA_CUDA_DLA && !device_memory)
        return fail_status(cudlaErrorInvalidAddress, fn, "pointer ", static_cast<const void*>(ptr),
                           " is host memory; in hybrid mode register CUDA device memory (cudaMalloc), as on a "
                           "Jetson, or set SOFTDLA_BACKEND=cpu to run on host memory");
    }
    std::lock_guard<std::mutex> lock(dev->state_mutex);
    if (!dev->alive) return fail_status(cudlaErrorInvalidDevice, fn, "device handle was destroyed");
    for (const auto& [addr, region] : dev->regions)
      if (region.base == reinterpret_cast<const uint8_t*>(ptr))
        return fail_status(cudlaErrorMemoryRegistered, fn, "pointer ", static_cast<const void*>(ptr),
                           " is already registered on this handle");
    const uint64_t addr = allocate_dla_range(size);
    if (addr == 0)
      return fail_status(cudlaErrorOutOfResources, fn, "the DLA address space has no room left for ", size,
                         " bytes: addresses are never reused, and this process has registered almost 2^64 bytes "
                         "in all; register fewer or smaller buffers");
    dev->regions[addr] = {reinterpret_cast<const uint8_t*>(ptr), size, flags, device_memory, nullptr, nullptr};
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
