// A small fixed pool for splitting one op over the CPU cores. parallel_for blocks until all chunks ran.
// Between ops the workers spin briefly before they sleep: a network runs dozens of ops a millisecond
// apart, and a condition-variable wake-up per op costs tens of microseconds. The caller never waits
// for a worker to wake: it takes chunks itself, and workers join a job as they come (a worker woken
// after an idle spell can take milliseconds to run on a virtual machine; a run that waited for it was
// ten times slower than one thread).
#pragma once
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace softdla {

class ThreadPool {
 public:
  explicit ThreadPool(unsigned threads);  // 0: SOFTDLA_THREADS or all cores
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  unsigned size() const { return unsigned(workers_.size()) + 1; }
  // Calls fn(begin, end) over [0, n) in contiguous chunks (taken as threads come free, shrinking
  // towards the end); work below min_per_chunk items per chunk runs on the calling thread alone. When a chunk
  // throws, the chunks not yet started are skipped and the first exception is rethrown here once every
  // thread is done with fn.
  void parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn, size_t min_per_chunk = 1);

  static ThreadPool& shared();

  // min_per_chunk for items that each cost `cost` element operations: small work stays on the calling
  // thread, since handing work to the workers costs microseconds.
  static size_t min_items(size_t cost) { return std::max<size_t>(1, (size_t(1) << 15) / std::max<size_t>(cost, 1)); }

 private:
  void worker_loop(unsigned home);
  void take_chunks(unsigned home);  // runs chunks of the current job until none is left
  bool take_from(size_t range);     // runs one chunk of range `range`; false when it has none left
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::mutex submit_mutex_;  // one parallel_for at a time; callers from other threads wait
  std::condition_variable wake_, done_;
  // The job: written while generation_ is odd (no worker inside a job), read by the workers after
  // they see the even generation that publishes it.
  const std::function<void(size_t, size_t)>* job_ = nullptr;
  size_t job_n_ = 0, chunks_ = 0;  // chunks_: the job's slices (a chunk is one or more of them)
  // The job's chunks in one contiguous range per thread (the caller's first, then each worker's): a
  // thread runs its own range from the front, then takes what is left of the others'. The same thread
  // so keeps the same part of consecutive ops (the same pixels or channels), whose data is then in its
  // own core's cache; chunks taken as threads come free would scatter them.
  struct alignas(64) Range {
    std::atomic<size_t> next{0};  // its next slice not yet taken
    size_t end = 0;
  };
  std::vector<Range> ranges_;
  std::atomic<size_t> done_chunks_{0};  // slices of the current job run (or skipped after a throw)
  std::atomic<bool> failed_{false};     // a chunk of the current job threw: skip the rest
  std::exception_ptr error_;            // the first exception a chunk of the current job threw (mutex_)
  std::atomic<unsigned> generation_{0};  // even: the current job is published; odd: one is being written
  std::atomic<unsigned> active_{0};      // workers inside a job (between joining and leaving it)
  unsigned sleepers_ = 0;                // workers waiting on wake_ (guarded by mutex_)
  bool waiting_ = false;                 // the submitter sleeps on done_ (guarded by mutex_)
  std::atomic<bool> stop_{false};
};

}  // namespace softdla
