#include "thread_pool.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <utility>

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

// A job is cut into this many slices per thread; a thread takes a chunk of slices at a time, a third
// of what is left of the range it takes from (at least one slice), so chunks start large (few takes)
// and shrink towards the range's end. A thread slowed down (a busy core, a costlier part of the op)
// leaves its share to the others, and the last chunks are short, so at the op's end no thread waits
// long for another: with four equal chunks a thread, the FP16 stem (units of unequal cost: 24, 24
// and 16 output channels) had its worker idle for 17 % of the layer on two threads.
constexpr size_t kSlicesPerThread = 32;
constexpr size_t kTakeDivisor = 3;

}  // namespace

ThreadPool::ThreadPool(unsigned threads) {
  if (threads == 0) {
    const char* env = std::getenv("SOFTDLA_THREADS");
    threads = env ? unsigned(std::max(1, std::atoi(env))) : std::max(1u, std::thread::hardware_concurrency());
  }
  ranges_ = std::vector<Range>(threads);
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
  size_t chunks = std::min<size_t>(size() * kSlicesPerThread, std::max<size_t>(1, n / std::max<size_t>(1, min_per_chunk)));
  std::unique_lock<std::mutex> submit(submit_mutex_, std::try_to_lock);
  if (chunks <= 1 || !submit.owns_lock()) {  // small, or the pool is busy (nested/concurrent use)
    fn(0, n);
    return;
  }
  // An odd generation turns late joiners of the last job away; the workers still inside it (every chunk
  // of it is done, so they only find none left) leave before its fields are rewritten.
  const unsigned g = generation_.load(std::memory_order_relaxed);
  generation_.store(g + 1);
  while (active_.load() != 0) relax();
  job_ = &fn;
  job_n_ = n;
  chunks_ = chunks;
  for (size_t r = 0; r < ranges_.size(); ++r) {
    ranges_[r].next.store(chunks * r / ranges_.size(), std::memory_order_relaxed);
    ranges_[r].end = chunks * (r + 1) / ranges_.size();
  }
  done_chunks_.store(0, std::memory_order_relaxed);
  failed_.store(false, std::memory_order_relaxed);
  error_ = nullptr;
  generation_.store(g + 2, std::memory_order_release);
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);  // pairs with a worker's check before it sleeps
    wake = sleepers_ > 0;
  }
  if (wake) wake_.notify_all();
  take_chunks(0);
  auto finished = [&] { return done_chunks_.load(std::memory_order_acquire) == chunks; };
  if (!spin_until(finished)) {
    std::unique_lock<std::mutex> lock(mutex_);
    waiting_ = true;
    done_.wait(lock, finished);
    waiting_ = false;
  }
  // The first exception any chunk threw, once every chunk is done (fn lives in the caller's frame, and
  // no thread calls it again): an allocation failure in a kernel reaches the caller as it would
  // without the pool.
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

void ThreadPool::take_chunks(unsigned home) {
  const size_t n = ranges_.size();
  for (size_t k = 0; k < n; ++k)
    while (take_from((home + k) % n)) {
    }
}

bool ThreadPool::take_from(size_t range) {
  Range& r = ranges_[range];
  size_t i = r.next.load(std::memory_order_relaxed), take = 1;
  do {
    if (i >= r.end) return false;
    take = std::max<size_t>(1, (r.end - i) / kTakeDivisor);
  } while (!r.next.compare_exchange_weak(i, i + take, std::memory_order_relaxed));
  const size_t begin = job_n_ * i / chunks_, end = job_n_ * (i + take) / chunks_;
  if (!failed_.load(std::memory_order_relaxed)) {
    try {
      if (begin < end) (*job_)(begin, end);
    } catch (...) {  // kept for the submitter; the chunks not yet started are skipped
      std::lock_guard<std::mutex> lock(mutex_);
      if (!error_) error_ = std::current_exception();
      failed_.store(true, std::memory_order_relaxed);
    }
  }
  if (done_chunks_.fetch_add(take, std::memory_order_acq_rel) + take == chunks_) {
    std::lock_guard<std::mutex> lock(mutex_);  // pairs with the submitter's check before it sleeps
    if (waiting_) done_.notify_all();
  }
  return true;
}

void ThreadPool::worker_loop(unsigned home) {
  unsigned seen = 0;  // the last generation this worker joined
  for (;;) {
    auto fresh = [&] {
      const unsigned g = generation_.load(std::memory_order_acquire);
      return stop_.load(std::memory_order_relaxed) || (g % 2 == 0 && g != seen);
    };
    if (!spin_until(fresh)) {
      std::unique_lock<std::mutex> lock(mutex_);
      ++sleepers_;
      wake_.wait(lock, fresh);
      --sleepers_;
    }
    if (stop_) return;
    const unsigned g = generation_.load(std::memory_order_acquire);
    if (g % 2 != 0 || g == seen) continue;
    // Join, then make sure the job was not replaced meanwhile (the submitter raises the generation
    // before it waits for active_ to drain, so one of the two sees the other).
    active_.fetch_add(1);
    if (generation_.load() != g) {
      active_.fetch_sub(1);
      continue;
    }
    seen = g;
    take_chunks(home);
    active_.fetch_sub(1, std::memory_order_release);
  }
}

}  // namespace softdla
