// 8 threads x 2 handles each x 1,000 tasks on the 2 emulated cores; every output is checked.
// Meant for the TSan build (scripts/sanitize.sh), and runs in the others too.
#include <atomic>
#include <thread>

#include "cudla_fixture.h"

namespace softdla::testing {
namespace {

TEST(CudlaConcurrency, ManyThreadsManyHandles) {
  constexpr int kThreads = 8, kHandlesPerThread = 2, kTasks = 1000;
  std::atomic<int> wrong{0}, failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      std::vector<std::unique_ptr<Ready>> handles;
      for (int h = 0; h < kHandlesPerThread; ++h) handles.push_back(std::make_unique<Ready>((t + h) % 2));
      for (int i = 0; i < kTasks; ++i) {
        Ready& r = *handles[size_t(i % kHandlesPerThread)];
        const int8_t seed = int8_t(t * 31 + i);
        for (int j = 0; j < 128; ++j) r.in.data[j] = uint8_t(int8_t(seed + j));
        // Every other task skips the lock: allowed, since this thread is the only submitter on the handle.
        const uint32_t flags = i % 2 ? CUDLA_SUBMIT_SKIP_LOCK_ACQUIRE : 0;
        if (cudlaSubmitTask(r.dev, &r.prepared(), 1, nullptr, flags) != cudlaSuccess ||
            cudlaGetLastError(r.dev) != cudlaSuccess) {
          ++failures;
          continue;
        }
        for (int j = 0; j < 128; ++j)
          if (int8_t(r.out.data[j]) != tiny_expected(int8_t(seed + j))) ++wrong;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
}

TEST(CudlaConcurrency, CreateDestroyRaces) {
  // Threads create, use and destroy handles while others do the same; the 16-per-core limit holds.
  std::vector<std::thread> threads;
  std::atomic<int> bad{0};
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        cudlaDevHandle h;
        const cudlaStatus s = cudlaCreateDevice(uint64_t(i % 2), &h, CUDLA_CUDA_DLA);
        if (s == cudlaErrorOutOfResources) continue;
        if (s != cudlaSuccess || cudlaDestroyDevice(h) != cudlaSuccess) ++bad;
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace softdla::testing
