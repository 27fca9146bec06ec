// What a task's start and outcome mean to a cuDLA handle (DeviceMonitor, runtime_state.h). Errors raised
// while a task runs are stored for cudlaGetLastError; the submit itself has already returned success by
// then on a Jetson, and softdla keeps that contract (docs/RUNTIME.md "Errors during execution").
#include <chrono>

#include "fault_injection.h"
#include "runtime_state.h"
#include "status.h"

namespace softdla::rt {
namespace {
const char* const kFn = "cudlaSubmitTask";
}  // namespace

TaskMonitor::Start DeviceMonitor::start() {
  Start s;
  s.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(dev_.timeout_ms.load());
  s.index = dev_.tasks_done++;
  if (const cudlaStatus fault = injected_fault_for(s.index); fault != cudlaSuccess) {
    // As a faulting DLA: the task does no work and its status waits in cudlaGetLastError.
    dev_.last_error = fail_status(fault, kFn, "task ", s.index, " failed: fault injected by SOFTDLA_FAULT");
    s.run = false;
  }
  return s;
}

void DeviceMonitor::finish(uint64_t index, const TaskOutcome& outcome) {
  cudlaStatus status = cudlaSuccess;
  switch (outcome.result) {
    case TaskResult::kDone: break;
    case TaskResult::kTimedOut:
      status = fail_status(cudlaErrorDlaErrEngineTimeout, kFn, outcome.message, " (timeout ", dev_.timeout_ms.load(),
                           " ms; raise it with cudlaSetTaskTimeoutInMs)");
      break;
    case TaskResult::kOutOfMemory: status = fail_status(cudlaErrorDlaErrNoMem, kFn, outcome.message); break;
    case TaskResult::kRejected:
      status = fail_status(cudlaErrorDlaErrInvalidInput, kFn, "task failed: ", outcome.message);
      break;
    case TaskResult::kDeviceFailure:
      status = fail_status(cudlaErrorUnknown, kFn, "task ", index, " failed on the GPU: ", outcome.message);
      break;
  }
  dev_.last_error = status;
}

}  // namespace softdla::rt
