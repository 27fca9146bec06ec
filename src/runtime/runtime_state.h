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
#include <memory>
#include <mutex>

#include "cudla.h"
#include "engine.h"

namespace softdla::rt {

inline constexpr size_t kMaxHandlesPerCore = 16;
inline constexpr uint32_t kDefaultTimeoutMs = 30'000;

struct Core {
  std::mutex exec_mutex;
  size_t open_handles = 0;  // guarded by Registry::mutex
};

struct Region {
  const uint8_t* host = nullptr;
  size_t size = 0;
  uint32_t flags = 0;  // cudlaAccessPermissionFlags used at registration
};

struct ModuleState;

struct DeviceState {
  uint64_t core = 0;
  uint32_t mode = CUDLA_CUDA_DLA;
  std::mutex state_mutex;
  bool alive = true;
  std::shared_ptr<ModuleState> module;            // at most one
  cudlaDevHandle handle = nullptr;
  std::map<uint64_t, Region> regions;             // DLA address -> host region
  std::atomic<uint32_t> timeout_ms{kDefaultTimeoutMs};
  std::atomic<int32_t> last_error{cudlaSuccess};  // status of the most recent task
  std::atomic<uint64_t> tasks_done{0};
};

struct ModuleState {
  explicit ModuleState(Model m) : engine(std::move(m)) {}
  Engine engine;
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

// A fresh range of DLA addresses (never reused, 256-byte aligned, distinct from any host pointer).
uint64_t allocate_dla_range(size_t size);

// The statistics buffer size and descriptor for a model (docs/RUNTIME.md).
TensorDescriptor statistics_descriptor(const Model& m);

}  // namespace softdla::rt
