#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <new>
#include <thread>
#include <vector>

#include "thread_pool.h"

namespace softdla {

TEST(ThreadPool, CoversEveryIndexOnce) {
  ThreadPool pool(3);
  for (size_t n : {0u, 1u, 2u, 7u, 1000u}) {
    std::vector<std::atomic<int>> hits(n);
    pool.parallel_for(n, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) hits[i]++;
    });
    for (size_t i = 0; i < n; ++i) EXPECT_EQ(hits[i].load(), 1);
  }
}

TEST(ThreadPool, ConcurrentCallersAllComplete) {
  ThreadPool pool(2);
  std::atomic<long> sum{0};
  std::vector<std::thread> callers;
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&] {
      for (int rep = 0; rep < 50; ++rep)
        pool.parallel_for(100, [&](size_t b, size_t e) { sum += long(e - b); });
    });
  for (auto& c : callers) c.join();
  EXPECT_EQ(sum.load(), 4 * 50 * 100);
}

// A chunk that throws (on a worker or on the caller) ends the call with that exception once every thread
// is done, and the pool keeps working afterwards.
TEST(ThreadPool, AnExceptionInAChunkReachesTheCaller) {
  ThreadPool pool(3);
  for (size_t bad : {0u, 500u, 999u}) {
    std::atomic<int> ran{0};
    EXPECT_THROW(pool.parallel_for(1000, [&](size_t b, size_t e) {
      ran += int(e - b);
      if (b <= bad && bad < e) throw std::bad_alloc();
    }), std::bad_alloc);
    EXPECT_GT(ran.load(), 0);
  }
  std::atomic<long> sum{0};
  pool.parallel_for(1000, [&](size_t b, size_t e) { sum += long(e - b); });
  EXPECT_EQ(sum.load(), 1000);
}

// Jobs of every small size back to back, with idle gaps long enough for the workers to fall asleep
// (a job then starts without them and they join it, or the next one, as they wake).
TEST(ThreadPool, JobsBackToBackAndAfterTheWorkersSlept) {
  ThreadPool pool(3);
  for (int rep = 0; rep < 300; ++rep) {
    const size_t n = 1 + rep % 37;
    std::vector<std::atomic<int>> hits(n);
    pool.parallel_for(n, [&](size_t b, size_t e) {
      for (size_t i = b; i < e; ++i) hits[i]++;
    });
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1);
    if (rep % 50 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

// Each thread starts on its own contiguous range of the chunks (the caller on the first): every chunk
// waits until all four threads hold one, so no thread can take a second chunk before each has taken
// its first, and the first chunks are the ranges' fronts.
TEST(ThreadPool, EachThreadStartsOnItsOwnRange) {
  ThreadPool pool(4);
  for (int rep = 0; rep < 20; ++rep) {
    std::mutex m;
    std::map<std::thread::id, size_t> first;  // each thread's first chunk's first index
    std::atomic<int> arrived{0};
    std::atomic<bool> timed_out{false};
    pool.parallel_for(16, [&](size_t b, size_t) {
      bool mine_first = false;
      {
        std::lock_guard<std::mutex> lock(m);
        mine_first = first.emplace(std::this_thread::get_id(), b).second;
      }
      if (!mine_first) return;
      arrived++;
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (arrived.load() < 4)
        if (std::chrono::steady_clock::now() > until) return timed_out.store(true);
        else std::this_thread::yield();
    });
    ASSERT_FALSE(timed_out.load());
    std::set<size_t> starts;
    for (const auto& [id, b] : first) starts.insert(b);
    EXPECT_EQ(starts, (std::set<size_t>{0, 4, 8, 12}));
    if (rep % 5 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));  // the workers asleep
  }
}

// Chunks shrink towards the end of each thread's range: the first is a large part of it (few takes),
// the last a single slice (1/32 of a thread's share), so at a job's end no thread waits long for
// another's last chunk.
TEST(ThreadPool, ChunksShrinkTowardsTheEnd) {
  ThreadPool pool(2);
  const size_t n = 6400;
  std::mutex m;
  std::vector<std::pair<size_t, size_t>> chunks;
  std::vector<std::atomic<int>> hits(n);
  pool.parallel_for(n, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) hits[i]++;
    std::lock_guard<std::mutex> lock(m);
    chunks.emplace_back(b, e);
  });
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1);
  size_t largest = 0, smallest = n;
  for (const auto& [b, e] : chunks) largest = std::max(largest, e - b), smallest = std::min(smallest, e - b);
  EXPECT_GE(largest, n / 2 / 4);   // a third of a thread's 3200: not four equal chunks a thread
  EXPECT_LE(smallest, n / 64);     // one slice of 100
  EXPECT_GE(chunks.size(), 4u);
  EXPECT_LE(chunks.size(), 40u);   // logarithmic in the slices, not one take per slice
}

}  // namespace softdla
