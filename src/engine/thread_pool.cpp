#include "thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace softdla {
namespace {

// How long a thread polls before it sleeps: long enough to span the gap between two ops of a
// network, short enough not to steal a core from other work for long.
constexpr auto kSpin = std::chrono::microseconds(100);

inline void relax() {
#if defined(__x86_64__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// Polls ready() for up to kSpin; true once it holds.
template <class Ready>
bool spin_until(const Ready& ready) {
  const auto until = std::chrono::steady_clock::now() + kSpin;
  for (unsigned i = 1;; ++i) {
    if (ready()) return true;
    relax();
    if (i % 64 == 0 && std::chrono::steady_clock::now() > until) return ready();
  }
}

void run_chunk(const std::function<void(size_t, size_t)>& fn, size_t n, size_t chunks, size_t i) {
  const size_t begin = n * i / chunks, end = n * (i + 1) / chunks;
  if (begin < end) fn(begin, end);
}

}  // namespace

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

void ThreadPool::parallel_for(size_t n, const std::function<void(size_t, size_t)>& fn,
                              size_t min_per_chunk) {
  if (n == 0) return;
  size_t chunks = std::min<size_t>(size(), std::max<size_t>(1, n / std::max<size_t>(1, min_per_chunk)));
  std::unique_lock<std::mutex> submit(submit_mutex_, std::try_to_lock);
  if (chunks <= 1 || !submit.owns_lock()) {  // small, or the pool is busy (nested/concurrent use)
    fn(0, n);
    return;
  }
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &fn;
    job_n_ = n;
    chunks_ = chunks;
    // Every worker acknowledges every generation (those without a chunk at once), so no worker can
    // still be reading this job's fields when the next one is written.
    pending_.store(unsigned(workers_.size()), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    wake = sleepers_ > 0;
  }
  if (wake) wake_.notify_all();
  run_chunk(fn, n, chunks, 0);
  if (!spin_until([this] { return pending_.load(std::memory_order_acquire) == 0; })) {
    std::unique_lock<std::mutex> lock(mutex_);
    waiting_ = true;
    done_.wait(lock, [this] { return pending_.load(std::memory_order_acquire) == 0; });
    waiting_ = false;
  }
  job_ = nullptr;
}

void ThreadPool::worker_loop(unsigned index) {
  unsigned seen = 0;
  for (;;) {
    auto fresh = [&] { return stop_.load(std::memory_order_relaxed) || generation_.load(std::memory_order_acquire) != seen; };
    if (!spin_until(fresh)) {
      std::unique_lock<std::mutex> lock(mutex_);
      ++sleepers_;
      wake_.wait(lock, fresh);
      --sleepers_;
    }
    if (stop_) return;
    seen = generation_.load(std::memory_order_acquire);
    if (index < chunks_) run_chunk(*job_, job_n_, chunks_, index);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mutex_);  // pairs with the submitter's check before it sleeps
      if (waiting_) done_.notify_all();
    }
  }
}

}  // namespace softdla
