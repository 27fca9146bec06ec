// Devices: version, count, create/destroy, attributes, task timeout, last error.
#include "cudla.h"
#include "guard.h"
#include "runtime_state.h"
#include "standalone_queue.h"

using namespace softdla;
using namespace softdla::rt;

namespace {
constexpr uint32_t kMaxTimeoutMs = 1'000'000;  // 1000 s
constexpr uint32_t kOrinDlaVersion = 2;        // DLA 2.0 (docs/RUNTIME.md)
}  // namespace

extern "C" cudlaStatus cudlaGetVersion(uint64_t* const version) {
  return guarded("cudlaGetVersion", [&] {
    if (!version) return fail_status(cudlaErrorInvalidParam, "cudlaGetVersion", "version pointer is NULL");
    *version = uint64_t(CUDLA_VER_MAJOR) * 1000000 + uint64_t(CUDLA_VER_MINOR) * 1000 + CUDLA_VER_PATCH;
    return cudlaSuccess;
  });
}

extern "C" cudlaStatus cudlaDeviceGetCount(uint64_t* const pNumDevices) {
  return guarded("cudlaDeviceGetCount", [&] {
    if (!pNumDevices) return fail_status(cudlaErrorInvalidParam, "cudlaDeviceGetCount", "pNumDevices is NULL");
    *pNumDevices = core_count();
    return cudlaSuccess;
  });
}

extern "C" cudlaStatus cudlaCreateDevice(uint64_t const device, cudlaDevHandle* const devHandle, uint32_t const flags) {
  static const char* fn = "cudlaCreateDevice";
  return guarded(fn, [&] {
    if (!devHandle) return fail_status(cudlaErrorInvalidParam, fn, "devHandle is NULL");
    *devHandle = nullptr;
    if (device >= core_count())
      return fail_status(cudlaErrorInvalidParam, fn, "device ", device, " does not exist: ", core_count(),
                         " DLA core(s) emulated (set SOFTDLA_NUM_DEVICES to change)");
    if (flags != CUDLA_CUDA_DLA && flags != CUDLA_STANDALONE)
      return fail_status(cudlaErrorInvalidParam, fn, "flags must be CUDLA_CUDA_DLA (0) or CUDLA_STANDALONE (1), got ",
                         flags);
    std::string why;
    // Standalone handles take the same backend as hybrid ones (their tasks stage NvSciBuf memory through
    // the GPU: cuda_backend.cpp).
    const gpu::Choice backend = gpu::choose_backend(&why);
    if (backend == gpu::Choice::kCudaMissing)
      return fail_status(cudlaErrorUnsupportedOperation, fn, "SOFTDLA_BACKEND=cuda but the CUDA backend is unavailable: ",
                         why, " (unset SOFTDLA_BACKEND to fall back to the CPU)");
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    Core& core = r.cores[device];
    if (core.open_handles >= kMaxHandlesPerCore)
      return fail_status(cudlaErrorOutOfResources, fn, "DLA core ", device, " already has ", kMaxHandlesPerCore,
                         " open handles; destroy one first");
    auto state = std::make_shared<DeviceState>();
    state->core = device;
    state->mode = flags;
    state->platform = gpu::platform();
    state->gpu_compute = backend == gpu::Choice::kCuda;
    // One backend per handle; the CPU backend is handed the GPU's stream helpers (when there is a GPU)
    // to run in CUDA stream order, and the CUDA backend keeps one as its fallback.
    std::unique_ptr<Backend> cpu = make_cpu_backend(state->platform);
    state->backend = state->gpu_compute ? make_cuda_backend(*state->platform, std::move(cpu)) : std::move(cpu);
    state->handle = new_device_handle(r);
    r.devices[reinterpret_cast<uintptr_t>(state->handle)] = state;
    ++core.open_handles;
    *devHandle = state->handle;
    return cudlaSuccess;
  });
}

extern "C" cudlaStatus cudlaDestroyDevice(cudlaDevHandle const devHandle) {
  static const char* fn = "cudlaDestroyDevice";
  return guarded(fn, [&] {
    std::shared_ptr<DeviceState> dev;
    Registry& r = registry();
    {
      std::lock_guard<std::mutex> lock(r.mutex);
      const auto it = r.devices.find(reinterpret_cast<uintptr_t>(devHandle));
      if (it == r.devices.end())
        return fail_status(cudlaErrorInvalidDevice, fn, "handle ", static_cast<const void*>(devHandle),
                           " is not a live device handle (never created or already destroyed)");
      dev = it->second;
      r.devices.erase(it);
      --r.cores[dev->core].open_handles;
    }
    // Standalone: end the handle's worker (a task waiting for pre-fences stops; queued ones do not run).
    std::unique_ptr<StandaloneQueue> queue;
    {
      std::lock_guard<std::mutex> state(dev->state_mutex);
      queue = std::move(dev->queue);
    }
    if (queue) queue->stop();
    // Wait for this handle's tasks in stream order (they take the core lock), then for a task running
    // on this core; then drop the module and the registrations.
    dev->backend->wait_idle();
    std::lock_guard<std::mutex> exec(r.cores[dev->core].exec_mutex);
    std::lock_guard<std::mutex> state(dev->state_mutex);
    dev->alive = false;
    if (dev->module) {
      dev->module->loaded = false;
      std::lock_guard<std::mutex> lock(r.mutex);
      r.modules.erase(reinterpret_cast<uintptr_t>(dev->module->handle));
      r.orphaned_modules.insert(reinterpret_cast<uintptr_t>(dev->module->handle));
      if (r.orphaned_modules.size() > Registry::kMaxOrphanedModules) r.orphaned_modules.erase(r.orphaned_modules.begin());
    }
    dev->module.reset();
    dev->regions.clear();
    return cudlaSuccess;
  });
}

extern "C" cudlaStatus cudlaDeviceGetAttribute(cudlaDevHandle const devHandle, cudlaDevAttributeType const attrib,
                                               cudlaDevAttribute* const pAttribute) {
  static const char* fn = "cudlaDeviceGetAttribute";
  return guarded(fn, [&] {
    if (!find_device(devHandle)) return fail_status(cudlaErrorInvalidDevice, fn, "not a live device handle");
    if (!pAttribute) return fail_status(cudlaErrorInvalidParam, fn, "pAttribute is NULL");
    switch (enum_value(attrib)) {
      case CUDLA_UNIFIED_ADDRESSING:
        // DLA addresses are distinct from host/CUDA addresses (as without UVA on Tegra).
        pAttribute->unifiedAddressingSupported = 0;
        return cudlaSuccess;
      case CUDLA_DEVICE_VERSION:
        pAttribute->deviceVersion = kOrinDlaVersion;
        return cudlaSuccess;
    }
    return fail_status(cudlaErrorInvalidAttribute, fn, "unknown attribute ", enum_value(attrib),
                       " (use CUDLA_UNIFIED_ADDRESSING or CUDLA_DEVICE_VERSION)");
  });
}

extern "C" cudlaStatus cudlaSetTaskTimeoutInMs(cudlaDevHandle const devHandle, uint32_t const timeout) {
  static const char* fn = "cudlaSetTaskTimeoutInMs";
  return guarded(fn, [&] {
    const auto dev = find_device(devHandle);
    if (!dev) return fail_status(cudlaErrorInvalidParam, fn, "not a live device handle");
    if (timeout == 0 || timeout > kMaxTimeoutMs)
      return fail_status(cudlaErrorInvalidParam, fn, "timeout ", timeout, " ms is outside 1 ms .. 1000 s");
    dev->timeout_ms = timeout;
    return cudlaSuccess;
  });
}

extern "C" cudlaStatus cudlaGetLastError(cudlaDevHandle const devHandle) {
  static const char* fn = "cudlaGetLastError";
  return guarded(fn, [&] {
    const auto dev = find_device(devHandle);
    if (!dev) return fail_status(cudlaErrorInvalidDevice, fn, "not a live device handle");
    std::shared_ptr<ModuleState> mod;
    {
      std::lock_guard<std::mutex> lock(dev->state_mutex);
      mod = dev->module;
    }
    if (mod && dev->last_error == cudlaSuccess) {
      // GPU tasks fail asynchronously: the CUDA error shows on the caller's stream and is kept here
      // (unless a DLA status is already recorded: an injected fault also leaves the stream failed).
      if (const std::string e = mod->prepared->poll_error(); !e.empty()) {
        dev->last_error = fail_status(cudlaErrorUnknown, fn, "a task failed on the GPU: ", e);
      }
    }
    return cudlaStatus(dev->last_error.load());
  });
}
