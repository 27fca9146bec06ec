// Standalone mode's asynchronous submission: each standalone device handle has its own queue and worker
// thread. A task waits there for its pre-fences (NvSciSync), signals its SOF fences, runs on the handle's
// backend (now, on the worker), then signals its EOF fences; cudlaSubmitTask returns as soon as the
// task is queued.
// docs/RUNTIME.md ("Standalone mode").
#pragma once
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "nvscisync.h"
#include "task.h"

namespace softdla::rt {

// An NvSciSyncObj imported with cudlaImportExternalSemaphore: libcudla's duplicate of it, freed when
// the import is removed and no queued task needs it any more.
struct ImportedSemaphore {
  ~ImportedSemaphore();
  NvSciSyncObj object = nullptr;
};

struct StandaloneJob {
  ResolvedTask task;
  std::vector<NvSciSyncFence> waits;                        // copies of the pre-fences
  std::vector<std::shared_ptr<ImportedSemaphore>> sof, eof;  // signalled at start / at the end
  std::vector<void*> sof_out, eof_out;  // the application's NvSciSyncFence for each, filled at submit
  bool run = true;                                          // false: CUDLA_SUBMIT_NOOP (fences only)
  bool take_lock = true;
};

class StandaloneQueue {
 public:
  explicit StandaloneQueue(DeviceState& dev);
  ~StandaloneQueue();  // stop()
  void push(std::vector<StandaloneJob> jobs);
  // Ends the worker: a task waiting for pre-fences stops waiting, queued tasks do not run; every queued
  // task's SOF and EOF fences are still signalled so no waiter hangs. Returns when the thread has ended.
  void stop();

 private:
  void loop();
  void execute(StandaloneJob& job);
  bool wait_pre_fences(const StandaloneJob& job, cudlaStatus* status);

  DeviceState& dev_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<StandaloneJob> jobs_;
  bool stopping_ = false;  // guarded by mutex_
  std::thread thread_;
};

}  // namespace softdla::rt
