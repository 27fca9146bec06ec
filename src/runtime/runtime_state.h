// The runtime's state behind the cuDLA handles: emulated DLA cores, device handles, modules, the
// registered-memory map. Handles are opaque numbers from counters that never repeat (looked up in maps,
// never dereferenced), so a destroyed or forged handle is always reported as invalid.
//
// Locking: Registry::mutex guards the slot tables (held only for lookups, never while a task runs).
// DeviceState::state_mutex guards a handle's module and registrations (short critical sections).
// Core::exec_mutex serializes task execution on one emulated DLA core (skipped with
// CUDLA_SUBMIT_SKIP_LOCK_ACQUIRE). Order: exec_mutex, then state_mutex.
#pragma once
#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <unordered_map>
#include <utility>
#include <memory>
#include <mutex>
#include <vector>

#include "cudla.h"
#include "engine.h"
#include "gpu_backend.h"

namespace softdla::rt {

inline constexpr size_t kMaxHandlesPerCore = 16;
inline constexpr uint32_t kDefaultTimeoutMs = 30'000;

struct Core {
  std::mutex exec_mutex;
  size_t open_handles = 0;  // guarded by Registry::mutex
};

struct ImportedSemaphore;  // standalone_queue.h

struct Region {
  const uint8_t* base = nullptr;  // host memory, or CUDA device memory when `device` is set
  size_t size = 0;
  uint32_t flags = 0;  // cudlaAccessPermissionFlags used at registration
  bool device = false;
  // Standalone imports (api_nvsci.cpp): libcudla's duplicate of the NvSciBuf object, or the imported
  // NvSciSync object (then `semaphore` is set and the region is no tensor memory). Queued tasks hold
  // copies, so an import removed while a task still needs it lives until that task is done.
  std::shared_ptr<void> keep;
  std::shared_ptr<ImportedSemaphore> semaphore;  // base then holds the application's handle value
};

struct ImportedSemaphore;  // standalone_queue.h
struct StagedTask;  // a CPU-backend task running in CUDA stream order (api_submit.cpp)

struct ModuleState;
class StandaloneQueue;  // standalone_queue.h

struct DeviceState {
  DeviceState();  // both in stream_tasks.cpp, where StagedTask is complete
  ~DeviceState();
  uint64_t core = 0;
  uint32_t mode = CUDLA_CUDA_DLA;
  // The CUDA device when this process has one (CUDA streams and memory can then be used), and
  // whether this handle computes on it (else on the CPU backend). Fixed at creation.
  gpu::Platform* platform = nullptr;
  bool gpu_compute = false;
  std::mutex state_mutex;
  bool alive = true;
  std::shared_ptr<ModuleState> module;            // at most one
  cudlaDevHandle handle = nullptr;
  std::map<uint64_t, Region> regions;             // DLA address -> host region
  std::atomic<uint32_t> timeout_ms{kDefaultTimeoutMs};
  std::atomic<int32_t> last_error{cudlaSuccess};  // status of the most recent task
  std::atomic<uint64_t> tasks_done{0};
  std::vector<std::unique_ptr<StagedTask>> staged;  // guarded by state_mutex; reaped when done
  // Pinned word a failing stream-ordered CPU task sets so the stream's fault kernel traps
  // (Platform::fail_stream); made on first use, guarded by state_mutex.
  uint32_t* stream_fault_flag = nullptr;
  // Standalone handles on the CUDA backend: device buffers their tasks stage through (standalone_gpu.h),
  // used only by the handle's worker.
  std::vector<std::pair<void*, size_t>> gpu_stage;
  std::unique_ptr<StandaloneQueue> queue;  // standalone handles: made on the first submit; guarded by state_mutex
};

struct ModuleState {
  explicit ModuleState(Model m) : engine(std::move(m)) {}
  ~ModuleState();
  Engine engine;
  std::unique_ptr<gpu::Module> gpu;  // set when the handle computes on the GPU
  std::weak_ptr<DeviceState> device;
  cudlaModule handle = nullptr;
  bool loaded = true;  // guarded by the device's state_mutex
  std::vector<TensorDescriptor> stats_descriptors;  // one per statistics output
};

struct Registry {
  std::mutex mutex;
  std::deque<Core> cores;
  std::unordered_map<uintptr_t, std::shared_ptr<DeviceState>> devices;
  std::unordered_map<uintptr_t, std::shared_ptr<ModuleState>> modules;
  uint64_t next_device = 0, next_module = 0, next_dla_address = 0;
};

cudlaDevHandle new_device_handle(Registry& r);  // caller holds r.mutex
cudlaModule new_module_handle(Registry& r);

Registry& registry();
uint64_t core_count();

// Live device behind a handle, or null (destroyed, never created, or null).
std::shared_ptr<DeviceState> find_device(cudlaDevHandle h);
std::shared_ptr<ModuleState> find_module(cudlaModule h);

// A fresh range of DLA addresses (never reused, 256-byte aligned, distinct from any host pointer), or 0
// when the DLA address space has no room left for `size` bytes.
uint64_t allocate_dla_range(size_t size);

// The statistics buffer size and descriptor for a model (docs/RUNTIME.md).
TensorDescriptor statistics_descriptor(const Model& m);

// Waits for the handle's stream-ordered CPU tasks and frees the finished ones (all of them with
// `wait_all`). Caller holds dev.state_mutex.
void reap_staged(DeviceState& dev, bool wait_all);

}  // namespace softdla::rt
