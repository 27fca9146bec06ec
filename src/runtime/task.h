// A validated task and the ways of running it (api_submit.cpp, stream_tasks.cpp).
#pragma once
#include <memory>
#include <vector>

#include "runtime_state.h"

namespace softdla::rt {

struct ResolvedTask {
  std::shared_ptr<ModuleState> module;
  std::vector<const void*> inputs;
  std::vector<void*> outputs;
  uint8_t* statistics = nullptr;  // null: profiling off for this task
  bool any_device_memory = false;
  std::vector<bool> input_on_device, output_on_device;
  bool statistics_on_device = false;
  std::vector<std::shared_ptr<void>> keep;  // standalone: the imported NvSciBuf objects the task uses
};

// Runs a task on the CPU engine now; returns its status (also for cudlaGetLastError).
cudlaStatus run_task(DeviceState& dev, const ResolvedTask& t);
// Runs a submission's tasks in order, recording each status for cudlaGetLastError; stops at the first
// failing task (the rest of the submission does not run).
void run_tasks(DeviceState& dev, const std::vector<ResolvedTask>& tasks);

// Enqueues tasks on a CUDA stream for the CPU engine: device buffers are staged through pinned host
// memory, the engine runs in a host function, outputs are copied back. Returns at once.
void enqueue_cpu_tasks(DeviceState& dev, std::vector<ResolvedTask> tasks, void* stream, bool take_lock);

}  // namespace softdla::rt
