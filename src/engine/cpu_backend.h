// The CPU backend's parts (backend.h): running a batch of tasks on an Engine now, and running it in CUDA
// stream order on a machine with a GPU (cpu_stream_order.cpp).
#pragma once
#include <atomic>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "backend.h"
#include "engine.h"
#include "gpu_backend.h"

namespace softdla::cpu {

// Runs the tasks in order on the calling thread (PreparedModule::enqueue's contract, without the lock);
// fills each task's statistics record. Returns false when a task failed or the monitor failed one.
bool run_tasks(const Engine& engine, std::span<const TaskIo> tasks, TaskMonitor& monitor);

// CPU tasks in CUDA stream order, for one backend (one user handle). Host functions may not call CUDA,
// so everything CUDA is enqueued up front: copies of device inputs into pinned staging, one host
// function that runs the batch, copies of staged outputs back to device memory, a host function that
// marks the staging free, and a kernel that fails the stream if a task of the batch failed (as a DLA
// fault fails it on a Jetson). Staging is freed later, on an ordinary thread (reap).
class StreamOrder {
 public:
  explicit StreamOrder(gpu::StreamOps& ops);
  ~StreamOrder();  // wait_idle(), then frees the fault flag
  StreamOrder(const StreamOrder&) = delete;
  StreamOrder& operator=(const StreamOrder&) = delete;

  // The batch holds `engine` until it has run. Throws std::runtime_error when CUDA refuses the work.
  void enqueue(std::shared_ptr<const Engine> engine, std::span<const TaskIo> tasks, void* stream,
               TaskMonitor& monitor, std::mutex* serialize);
  void wait_idle();

  struct Batch;

 private:
  void reap(bool wait_all);  // caller holds mutex_

  gpu::StreamOps& ops_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<Batch>> batches_;  // enqueued, not yet reaped
  // Pinned word a failing batch sets so its stream's fault kernel traps; made on first use. Never
  // cleared: a trap leaves the CUDA context unusable anyway.
  uint32_t* fault_flag_ = nullptr;
};

}  // namespace softdla::cpu
