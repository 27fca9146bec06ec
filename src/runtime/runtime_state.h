// The runtime's state behind the cuDLA handles: emulated DLA cores, device handles, modules, the
// registered-memory map. Handles are opaque numbers from counters that never repeat (looked up in maps,
// never dereferenced), so a destroyed or forged handle is always reported as invalid.
//
// Locking: Registry::mutex guards the slot tables (held only for lookups, never while a task runs).
// DeviceState::state_mutex guards a handle's module and registrations (short critical sections).
// Core::exec_mutex serializes task execution on one emulated DLA core (skipped with
// CUDLA_SUBMIT_SKIP_LOCK_ACQUIRE). Order: exec_mutex, then state_mutex.
//
// Backends: each handle picks its backend at creation (SOFTDLA_BACKEND) and holds it as one
// softdla::Backend (src/engine/backend.h); its module is prepared on that backend only, as one
// PreparedModule. The runtime validates tasks and turns their outcomes into cuDLA statuses
// (DeviceMonitor); how a backend runs them, in stream order or not, is the backend's business.
#pragma once
#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <unordered_map>
#include <utility>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "cudla.h"
#include "backend.h"
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

struct ModuleState;
struct DeviceState;
class StandaloneQueue;  // standalone_queue.h

// The runtime's side of a handle's tasks (task_monitor.cpp): numbers them, injects SOFTDLA_FAULT, gives
// each the handle's timeout, and records each outcome as the cuDLA status cudlaGetLastError returns.
class DeviceMonitor final : public TaskMonitor {
 public:
  explicit DeviceMonitor(DeviceState& dev) : dev_(dev) {}
  Start start() override;
  void finish(uint64_t index, const TaskOutcome& outcome) override;

 private:
  DeviceState& dev_;
};

struct DeviceState {
  uint64_t core = 0;
  uint32_t mode = CUDLA_CUDA_DLA;
  // The CUDA device when this process has one (CUDA streams and memory can then be used), and
  // whether this handle computes on it (else on the CPU backend). Fixed at creation.
  gpu::Platform* platform = nullptr;
  bool gpu_compute = false;
  // Declared before `backend`, which waits for stream-ordered work that reports to it.
  DeviceMonitor monitor{*this};
  std::unique_ptr<Backend> backend;  // set at creation: the CPU or the CUDA backend
  std::mutex state_mutex;
  bool alive = true;
  std::shared_ptr<ModuleState> module;            // at most one
  cudlaDevHandle handle = nullptr;
  std::map<uint64_t, Region> regions;             // DLA address -> host region
  std::atomic<uint32_t> timeout_ms{kDefaultTimeoutMs};
  std::atomic<int32_t> last_error{cudlaSuccess};  // status of the most recent task
  std::atomic<uint64_t> tasks_done{0};
  std::unique_ptr<StandaloneQueue> queue;  // standalone handles: made on the first submit; guarded by state_mutex
  ~DeviceState();  // standalone_queue.cpp, where StandaloneQueue is complete
};

struct ModuleState {
  std::unique_ptr<PreparedModule> prepared;  // on the handle's backend
  std::weak_ptr<DeviceState> device;
  cudlaModule handle = nullptr;
  bool loaded = true;  // guarded by the device's state_mutex
  std::vector<TensorDescriptor> stats_descriptors;  // one per statistics output

  const Model& model() const { return prepared->model(); }
};

struct Registry {
  std::mutex mutex;
  std::deque<Core> cores;
  std::unordered_map<uintptr_t, std::shared_ptr<DeviceState>> devices;
  std::unordered_map<uintptr_t, std::shared_ptr<ModuleState>> modules;
  // Modules whose device handle was destroyed with them loaded (the latest kMaxOrphanedModules): cuDLA
  // answers those with cudlaErrorInvalidDevice, a handle never loaded or unloaded with InvalidModule.
  std::set<uintptr_t> orphaned_modules;
  static constexpr size_t kMaxOrphanedModules = 4096;
  uint64_t next_device = 0, next_module = 0, next_dla_address = 0;
};

cudlaDevHandle new_device_handle(Registry& r);  // caller holds r.mutex
cudlaModule new_module_handle(Registry& r);

Registry& registry();
uint64_t core_count();

// Live device behind a handle, or null (destroyed, never created, or null).
std::shared_ptr<DeviceState> find_device(cudlaDevHandle h);
std::shared_ptr<ModuleState> find_module(cudlaModule h);
// The status (and log line) for a handle find_module did not find: InvalidDevice where its device was
// destroyed with it loaded, InvalidModule otherwise.
cudlaStatus missing_module(cudlaModule h, const char* fn);

// A fresh range of DLA addresses (never reused, 256-byte aligned, distinct from any host pointer), or 0
// when the DLA address space has no room left for `size` bytes.
uint64_t allocate_dla_range(size_t size);

// The statistics buffer size and descriptor for a model (docs/RUNTIME.md).
TensorDescriptor statistics_descriptor(const Model& m);

}  // namespace softdla::rt
