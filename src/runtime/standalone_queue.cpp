// The standalone worker (standalone_queue.h).
#include "standalone_queue.h"

#include <chrono>

#include "nvsci_loader.h"
#include "status.h"

namespace softdla::rt {

ImportedSemaphore::~ImportedSemaphore() {
  if (const NvSciApi* api = nvsci(); api && object) api->sync_obj_free(object);
}

DeviceState::~DeviceState() = default;

StandaloneQueue::StandaloneQueue(DeviceState& dev) : dev_(dev), thread_([this] { loop(); }) {}

StandaloneQueue::~StandaloneQueue() { stop(); }

void StandaloneQueue::push(std::vector<StandaloneJob> jobs) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& j : jobs) jobs_.push_back(std::move(j));
  }
  cv_.notify_all();
}

void StandaloneQueue::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

namespace {
void signal_all(const std::vector<std::shared_ptr<ImportedSemaphore>>& sems) {
  const NvSciApi* api = nvsci();
  for (const auto& s : sems)
    if (api->sync_signal(s->object) != NvSciError_Success)
      fail_status(cudlaErrorNvSci, "cudlaSubmitTask", "could not signal an imported NvSciSync object");
}
}  // namespace

void StandaloneQueue::loop() {
  for (;;) {
    StandaloneJob job;
    bool stopping;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
      if (jobs_.empty()) return;
      stopping = stopping_;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    if (stopping) {  // the handle is being destroyed: nothing more runs, but every fence is signalled
      signal_all(job.sof);
      signal_all(job.eof);
      continue;
    }
    execute(job);
  }
}

// Waits in short slices so a destroyed handle or the task timeout ends the wait.
bool StandaloneQueue::wait_pre_fences(const StandaloneJob& job, cudlaStatus* status) {
  const NvSciApi* api = nvsci();
  const uint32_t timeout_ms = dev_.timeout_ms.load();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (const NvSciSyncFence& f : job.waits) {
    for (;;) {
      const NvSciError e = api->sync_fence_wait(&f, api->wait_context, 5'000);
      if (e == NvSciError_Success) break;
      if (e != NvSciError_Timeout) {
        *status = fail_status(cudlaErrorDlaErrInvalidPreAction, "cudlaSubmitTask",
                              "a pre-fence can never be signalled (its NvSciSync object was freed), NvSciError ",
                              int(e));
        return false;
      }
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (stopping_) {
          *status = fail_status(cudlaErrorDlaErrEngineTimeout, "cudlaSubmitTask",
                                "the device handle was destroyed while a task waited for its pre-fences");
          return false;
        }
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        *status = fail_status(cudlaErrorDlaErrEngineTimeout, "cudlaSubmitTask", "a pre-fence was not signalled within ",
                              timeout_ms, " ms (the task timeout; raise it with cudlaSetTaskTimeoutInMs)");
        return false;
      }
    }
  }
  return true;
}

void StandaloneQueue::execute(StandaloneJob& job) {
  cudlaStatus status = cudlaSuccess;
  if (wait_pre_fences(job, &status)) {
    signal_all(job.sof);
    if (job.run) {
      // Now, on this thread, on the handle's backend (the CUDA backend stages the NvSciBuf host memory
      // through the GPU); the monitor records the task's status.
      std::mutex* serialize = job.take_lock ? &registry().cores[dev_.core].exec_mutex : nullptr;
      try {
        job.task.module->prepared->enqueue({&job.task.io, 1}, std::nullopt, dev_.monitor, serialize);
      } catch (const std::exception& e) {
        dev_.last_error = fail_status(cudlaErrorUnknown, "cudlaSubmitTask", "task failed: ", e.what());
      }
    } else {
      dev_.last_error = status;
    }
  } else {
    signal_all(job.sof);
    dev_.last_error = status;
  }
  // The EOF fences are signalled even for a failed task (its error is in cudlaGetLastError), so a
  // waiter never hangs on a task that will not run.
  signal_all(job.eof);
}

}  // namespace softdla::rt
