// Task submission. Every task of a call is validated before any runs; then the tasks run in array
// order. Standalone handles queue them on the handle's worker (standalone_queue.h). In hybrid mode the
// whole submission goes to the module's backend (src/engine/backend.h) in one call: in CUDA stream
// order when a stream is given or a buffer is device memory (the call returns at once: the CUDA backend
// enqueues each task on the stream, the CPU backend stages device memory and runs in a host function
// on it), else now (the CPU backend with host memory; the call returns when the tasks are done).
// Errors raised while a task runs (timeout, engine faults) are stored for cudlaGetLastError
// (DeviceMonitor); the submit itself has already returned success by then on a Jetson, and softdla
// keeps that contract.
#include <cstring>

#include "cudla.h"
#include "guard.h"
#include "runtime_state.h"
#include "task.h"
#include "softdla/cudla_ext.h"
#include "standalone_events.h"
#include "standalone_queue.h"

using namespace softdla;
using namespace softdla::rt;

namespace {

constexpr uint32_t kKnownFlags = CUDLA_SUBMIT_NOOP | CUDLA_SUBMIT_SKIP_LOCK_ACQUIRE | CUDLA_SUBMIT_DIAGNOSTICS_TASK;
const char* const kFn = "cudlaSubmitTask";

// Host bytes behind a DLA address registered on this handle, if at least `need` bytes are there.
const Region* resolve(const DeviceState& dev, const void* dla, uint64_t need, uint64_t& offset) {
  const uint64_t addr = reinterpret_cast<uint64_t>(dla);
  auto it = dev.regions.upper_bound(addr);
  if (it == dev.regions.begin()) return nullptr;
  --it;
  offset = addr - it->first;
  if (offset >= it->second.size || it->second.size - offset < need) return nullptr;
  return &it->second;
}

cudlaStatus resolve_task(const DeviceState& dev, const cudlaTask& t, size_t index, ResolvedTask& out) {
  if ((t.waitEvents || t.signalEvents) && dev.mode != CUDLA_STANDALONE)
    return fail_status(cudlaErrorUnsupportedOperation, kFn, "task ", index,
                       ": wait/signal events need NvSci (standalone mode on Tegra); pass NULL in hybrid mode");
  // cuDLA allows a task of events alone (no tensors, even with no module loaded); softdla does not
  // implement those (docs/RUNTIME.md).
  if (!t.inputTensor && !t.outputTensor)
    return fail_status(cudlaErrorUnsupportedOperation, kFn, "task ", index,
                       ": event-only tasks (no input and no output tensors) are not implemented in softdla; give "
                       "the task its module's tensors");
  if (!dev.module || reinterpret_cast<uintptr_t>(t.moduleHandle) != reinterpret_cast<uintptr_t>(dev.module->handle))
    return fail_status(cudlaErrorInvalidModule, kFn, "task ", index,
                       ": moduleHandle is not the module loaded on this device handle");
  if (!t.inputTensor || !t.outputTensor)
    return fail_status(cudlaErrorUnsupportedOperation, kFn, "task ", index, ": inputTensor and outputTensor must be set");
  const Model& m = dev.module->model();
  if (t.numInputTensors != m.inputs.size())
    return fail_status(cudlaErrorInvalidParam, kFn, "task ", index, ": numInputTensors is ", t.numInputTensors,
                       ", the module has ", m.inputs.size());
  const size_t stats = dev.module->stats_descriptors.size();
  if (t.numOutputTensors != m.outputs.size() && t.numOutputTensors != m.outputs.size() + stats)
    return fail_status(cudlaErrorInvalidParam, kFn, "task ", index, ": numOutputTensors is ", t.numOutputTensors,
                       ", the module has ", m.outputs.size(), " outputs (+", stats, " statistics buffer)");
  out.module = dev.module;
  bool on_device = false;
  auto check = [&](const void* p, uint64_t need, const char* kind, size_t i, bool writes, bool statistics) -> const uint8_t* {
    uint64_t offset = 0;
    const Region* r = p ? resolve(dev, p, need, offset) : nullptr;
    if (!r || r->semaphore) {
      fail_status(cudlaErrorInvalidAddress, kFn, "task ", index, ": ", kind, " ", i, " (", p,
                  ") is not inside memory registered on this handle with ", need,
                  " bytes to spare; register it with cudlaMemRegister and pass the pointer it returned");
      return nullptr;
    }
    // An output or statistics buffer is written: memory imported read-only (the caller's, or NvSci's
    // reconciled permission) never is.
    if (writes && (r->flags & CUDLA_READ_ONLY_PERM)) {
      fail_status(cudlaErrorInvalidAddress, kFn, "task ", index, ": ", kind, " ", i, " (", p,
                  ") was imported with CUDLA_READ_ONLY_PERM and a task writes it; import it with "
                  "CUDLA_READ_WRITE_PERM, or pass it as an input");
      return nullptr;
    }
    if (statistics && !(r->flags & CUDLA_TASK_STATISTICS)) {
      fail_status(cudlaErrorInvalidAddress, kFn, "task ", index, ": statistics buffer ", p,
                  " must be registered with CUDLA_TASK_STATISTICS");
      return nullptr;
    }
    on_device = r->device;
    if (r->keep) out.keep.push_back(r->keep);
    return r->base + offset;
  };
  for (size_t i = 0; i < m.inputs.size(); ++i) {
    const uint8_t* host = check(t.inputTensor[i], m.inputs[i].desc.size, "input", i, false, false);
    if (!host) return cudlaErrorInvalidAddress;
    out.io.inputs.push_back(host);
    out.io.input_on_device.push_back(on_device);
  }
  for (size_t i = 0; i < t.numOutputTensors; ++i) {
    const bool is_stats = i >= m.outputs.size();
    const uint64_t need = is_stats ? dev.module->stats_descriptors[i - m.outputs.size()].size : m.outputs[i].desc.size;
    const uint8_t* host = check(t.outputTensor[i], need, is_stats ? "statistics output" : "output", i, true, is_stats);
    if (!host) return cudlaErrorInvalidAddress;
    if (is_stats) {
      out.io.statistics = const_cast<uint8_t*>(host);
      out.io.statistics_on_device = on_device;
    } else {
      out.io.outputs.push_back(const_cast<uint8_t*>(host));
      out.io.output_on_device.push_back(on_device);
    }
  }
  return cudlaSuccess;
}

// Standalone: validated like any submission, then queued on the handle's worker; returns at once.
cudlaStatus submit_standalone(const std::shared_ptr<DeviceState>& dev, const cudlaTask* tasks, uint32_t count,
                              uint32_t flags) {
  std::vector<StandaloneJob> jobs(count);
  std::lock_guard<std::mutex> lock(dev->state_mutex);
  if (!dev->alive) return fail_status(cudlaErrorInvalidDevice, kFn, "device handle was destroyed");
  for (uint32_t i = 0; i < count; ++i) {
    if (const cudlaStatus s = resolve_task(*dev, tasks[i], i, jobs[i].task); s != cudlaSuccess) return s;
    if (const cudlaStatus s = resolve_events(*dev, tasks[i], i, jobs[i]); s != cudlaSuccess) return s;
    jobs[i].run = !(flags & CUDLA_SUBMIT_NOOP);  // a NOOP task still waits and signals
    jobs[i].take_lock = !(flags & CUDLA_SUBMIT_SKIP_LOCK_ACQUIRE);
  }
  // Fences are generated and queued under the handle's lock, so they are signalled in generation order.
  for (StandaloneJob& j : jobs) fill_signal_fences(j);
  if (!dev->queue) dev->queue = std::make_unique<StandaloneQueue>(*dev);
  dev->queue->push(std::move(jobs));
  return cudlaSuccess;
}

}  // namespace

extern "C" cudlaStatus cudlaSubmitTask(cudlaDevHandle const devHandle, const cudlaTask* const ptrToTasks,
                                       uint32_t const numTasks, void* const stream, uint32_t const flags) {
  return guarded(kFn, [&] {
    const auto dev = find_device(devHandle);
    if (!dev) return fail_status(cudlaErrorInvalidDevice, kFn, "not a live device handle");
    if (!ptrToTasks || numTasks == 0) return fail_status(cudlaErrorInvalidParam, kFn, "no tasks (NULL or numTasks 0)");
    if (flags & ~kKnownFlags) return fail_status(cudlaErrorInvalidParam, kFn, "unknown flags ", flags);
    if (flags & CUDLA_SUBMIT_DIAGNOSTICS_TASK)
      return fail_status(cudlaErrorUnsupportedOperation, kFn,
                         "fault diagnostics tasks test DLA silicon; a software DLA has none (docs/RUNTIME.md)");
    if (dev->mode == CUDLA_STANDALONE && stream)
      return fail_status(cudlaErrorInvalidParam, kFn, "standalone handles take no stream; pass NULL");
    if (dev->mode == CUDLA_CUDA_DLA && stream && !dev->platform)
      return fail_status(cudlaErrorUnsupportedOperation, kFn,
                         "no CUDA GPU is available (", gpu::unavailable_reason(),
                         "), so tasks cannot be ordered on a CUDA stream; pass stream NULL to run synchronously "
                         "(docs/RUNTIME.md)");
    // Stream-ordered work needs a stream that is not being captured (NVIDIA documents this).
    const bool stream_ordered = dev->mode == CUDLA_CUDA_DLA && dev->platform && (stream || dev->gpu_compute);
    if (stream_ordered) {
      bool capturing = false;
      try {
        capturing = dev->platform->capturing(stream);
      } catch (const std::exception& e) {
        return fail_status(cudlaErrorInvalidParam, kFn, "stream ", stream, " is not a usable CUDA stream: ", e.what());
      }
      if (capturing)
        return fail_status(cudlaErrorUnsupportedOperation, kFn,
                           "the stream is being captured into a CUDA graph; cuDLA tasks cannot be captured "
                           "(submit outside the capture)");
    }

    if (dev->mode == CUDLA_STANDALONE) return submit_standalone(dev, ptrToTasks, numTasks, flags);

    std::vector<ResolvedTask> tasks(numTasks);
    {
      std::lock_guard<std::mutex> lock(dev->state_mutex);
      if (!dev->alive) return fail_status(cudlaErrorInvalidDevice, kFn, "device handle was destroyed");
      for (uint32_t i = 0; i < numTasks; ++i)
        if (const cudlaStatus s = resolve_task(*dev, ptrToTasks[i], i, tasks[i]); s != cudlaSuccess) return s;
    }
    if (flags & CUDLA_SUBMIT_NOOP) return cudlaSuccess;  // validated; nothing runs

    std::mutex* serialize =
        flags & CUDLA_SUBMIT_SKIP_LOCK_ACQUIRE ? nullptr : &registry().cores[dev->core].exec_mutex;
    std::vector<TaskIo> ios;
    bool on_device = false;
    for (ResolvedTask& t : tasks) {
      on_device |= t.io.any_on_device();
      ios.push_back(std::move(t.io));
    }
    PreparedModule& module = *tasks[0].module->prepared;  // every task names the handle's module
    if (!stream && !on_device) {
      module.enqueue(ios, std::nullopt, dev->monitor, serialize);
      return cudlaSuccess;
    }
    try {
      module.enqueue(ios, stream, dev->monitor, serialize);
    } catch (const std::exception& e) {
      return fail_status(cudlaErrorCuda, kFn, "could not enqueue the task on the CUDA stream: ", e.what());
    }
    return cudlaSuccess;
  });
}
