#include "thread_pool.h"

#include <algorithm>
#include <cstdlib>

namespace softdla {

ThreadPool::ThreadPool(unsigned threads) {
  if (threads == 0) {
    const char* env = std::getenv("SOFTDLA_THREADS");
    threads = env ? unsigned(std::max(1, std::atoi(env))) : std::max(1u, std::thread::hardware_concurrency());
  }
  for (unsigned i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

ThreadPool& ThreadPool::shared() {
  static ThreadPool pool(0);
  return pool;
}

static void run_chunk(const std::function<void(size_t, size_t)>& fn, size_t n, size_t chunks, size_t i) {
  const size_t begin = n * i / chunks, end = n * (i + 1) / chunks;
  if (begin < end) fn(begin, end);
}

void ThreadPool::parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn,
                              size_t min_per_chunk) {
  if (n == 0) return;
  size_t chunks = std::min<size_t>(size(), std::max<size_t>(1, n / std::max<size_t>(1, min_per_chunk)));
  std::unique_lock<std::mutex> submit(submit_mutex_, std::try_to_lock);
  if (chunks <= 1 || !submit.owns_lock()) {  // small, or the pool is busy (nested/concurrent use)
    fn(0, n);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    job_n_ = n;
    chunks_ = chunks;
    pending_ = unsigned(chunks - 1);
    ++generation_;
  }
  wake_.notify_all();
  run_chunk(fn, n, chunks, 0);
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
}

void ThreadPool::worker_loop(unsigned index) {
  unsigned seen = 0;
  for (;;) {
    const std::function<void(size_t, size_t)>* job;
    size_t n, chunks;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (index >= chunks_) continue;
      job = job_, n = job_n_, chunks = chunks_;
    }
    run_chunk(*job, n, chunks, index);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0) done_.notify_all();
    }
  }
}

}  // namespace softdla
