// The one boundary between the engine's users (the cuDLA runtime, the test entry points) and a backend:
//
//   Backend::prepare(model) -> PreparedModule;  PreparedModule::enqueue(tasks, stream or now, monitor)
//
// The CPU backend (cpu_backend.cpp: the Engine, plus CUDA stream order through pinned staging) and the
// CUDA backend (cuda_backend.cpp: a gpu::Module of the plugin) both implement it. A user picks one
// backend per handle and prepares each model on that backend only: a GPU handle never builds a CPU
// engine, a CPU handle never uploads to the GPU. Nothing here knows cuDLA: what a task's number, deadline
// and outcome mean to a cuDLA handle is the TaskMonitor's business, which the runtime implements.
#pragma once
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model.h"

namespace softdla {

namespace gpu {
class Platform;
class StreamOps;
}  // namespace gpu

// One task's buffers, in the bindings' formats and the model's I/O order.
struct TaskIo {
  std::vector<const void*> inputs;
  std::vector<void*> outputs;
  void* statistics = nullptr;  // the layer-wise statistics record (docs/RUNTIME.md); null: not profiled
  // Which buffers are CUDA device memory (only where a GPU is present; empty means none). The CPU
  // backend stages those through pinned host memory; the CUDA backend takes device memory in stream
  // order and host memory when run now.
  std::vector<bool> input_on_device, output_on_device;
  bool statistics_on_device = false;

  bool any_on_device() const;
};

enum class TaskResult {
  kDone,
  kTimedOut,       // ran past its deadline (checked between ops); outputs incomplete
  kOutOfMemory,    // host memory ran out while it ran
  kRejected,       // the engine refused the task's data
  kDeviceFailure,  // the GPU failed it (a CUDA error)
};

struct TaskOutcome {
  TaskResult result = TaskResult::kDone;
  std::string message;  // what failed, for the log; empty when done
};

// The caller's side of running tasks. Called on the thread that runs the task (the caller's, or a CUDA
// host function's for CPU work in stream order) or, on the CUDA backend in stream order, the thread
// that enqueues it; never under a backend lock other than `serialize` (enqueue). Must outlive the work
// it watches: a backend's destructor and wait_idle() wait for work still to run in stream order.
class TaskMonitor {
 public:
  struct Start {
    uint64_t index = 0;  // the task's number, written into its statistics record
    // False: the task fails as a faulting DLA fails it (the monitor has recorded why): it does no work,
    // the rest of the batch does not run, and in stream order the stream fails (gpu::StreamOps::fail_stream).
    bool run = true;
    std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  };
  // Just before a task starts (the CUDA backend: before it is enqueued).
  virtual Start start() = 0;
  // When a started task that ran has finished (the CUDA backend in stream order: once it is enqueued;
  // its failures on the GPU show later through PreparedModule::poll_error).
  virtual void finish(uint64_t index, const TaskOutcome& outcome) = 0;

 protected:
  ~TaskMonitor() = default;
};

// A model prepared on one backend (weights converted or uploaded, kernels chosen, scratch allocated).
class PreparedModule {
 public:
  virtual ~PreparedModule() = default;
  virtual const Model& model() const = 0;

  // Runs `tasks` in order, asking `monitor` before and telling it after each; a task that fails (or
  // that the monitor fails) ends the batch. `stream` empty: now, on the calling thread; returns when
  // the batch is done. `stream` set: in the order of that cudaStream_t (nullptr: the legacy default
  // stream); returns at once. `serialize`, when set, is held while the tasks run on the host (or, on
  // the CUDA backend in stream order, while they are enqueued). Throws std::runtime_error only when
  // stream-ordered work cannot be enqueued (what was enqueued before stays enqueued).
  virtual void enqueue(std::span<const TaskIo> tasks, std::optional<void*> stream, TaskMonitor& monitor,
                       std::mutex* serialize) = 0;

  // The first asynchronous failure of earlier stream-ordered work on the GPU (empty: none seen).
  virtual std::string poll_error() { return {}; }

  // Whether op i runs inside op i - 1's kernel (OpKernel::fuse_next) on this backend, when it says.
  virtual bool op_fused(size_t /*op*/) const { return false; }
};

// One per user handle: prepares models, and owns what that handle's stream-ordered work shares.
class Backend {
 public:
  virtual ~Backend() = default;  // waits as wait_idle() does
  // Throws std::runtime_error (or softdla::Error) when the model cannot be prepared.
  virtual std::unique_ptr<PreparedModule> prepare(Model model) = 0;
  // Waits until host-side work left in stream order (CPU tasks in CUDA host functions) has run, and
  // frees its staging. A CUDA context that failed runs no more host functions: then it waits for none.
  virtual void wait_idle() = 0;
};

// The CPU backend. `streams` (null where there is no GPU) lets it run tasks in CUDA stream order.
std::unique_ptr<Backend> make_cpu_backend(gpu::StreamOps* streams);

// The CUDA backend on `platform`. A model it cannot prepare goes to `fallback` when one is given (the
// reason is logged as a warning), else prepare() throws.
std::unique_ptr<Backend> make_cuda_backend(gpu::Platform& platform, std::unique_ptr<Backend> fallback);

}  // namespace softdla
