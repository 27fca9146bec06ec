// A host-only stand-in for libsoftdla_cuda.so (gpu_backend.h's Platform), so that CI exercises the CPU
// backend's CUDA stream order and the CUDA backend's fallback without a GPU. One "stream": a worker
// thread that runs the enqueued copies, host functions and fault checks in order, a little behind the
// submitter so that work is really in flight. "Device memory" is host memory the test marks with
// fake_gpu_mark_device. Freeing pinned memory waits for the stream, as cudaFreeHost waits for the device.
// It prepares no model on the "GPU" (load throws), as the real backend does for one it cannot run.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "gpu_backend.h"

namespace {
using namespace softdla::gpu;

class Stream {
 public:
  Stream() : thread_([this] { loop(); }) {}
  ~Stream() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void push(std::function<void()> work) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queue_.push_back(std::move(work));
    }
    cv_.notify_all();
  }
  void drain() {
    std::unique_lock<std::mutex> lock(mutex_);
    idle_.wait(lock, [&] { return queue_.empty() && !busy_; });
  }

 private:
  void loop() {
    for (;;) {
      std::function<void()> work;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;
        work = std::move(queue_.front());
        queue_.pop_front();
        busy_ = true;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      work();
      {
        std::lock_guard<std::mutex> lock(mutex_);
        busy_ = false;
      }
      idle_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_, idle_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false, busy_ = false;
  std::thread thread_;
};

class FakePlatform final : public Platform {
 public:
  void* alloc_pinned(size_t bytes) override {
    ++pinned_live;
    return ::operator new(bytes ? bytes : 1);
  }
  void free_pinned(void* p) override {
    stream_.drain();
    --pinned_live;
    ::operator delete(p);
  }
  void copy_async(void* dst, const void* src, size_t bytes, void*) override {
    stream_.push([=] { std::memcpy(dst, src, bytes); });
  }
  void host_call(void*, void (*fn)(void*), void* data) override {
    stream_.push([=] { fn(data); });
  }
  void fail_stream(void*, const volatile uint32_t* flag) override {
    stream_.push([this, flag] {
      if (!flag || *flag) failed = true;
    });
  }
  bool context_usable() override { return true; }
  std::string describe() const override { return "fake GPU (tests/cpp/fake_gpu_plugin.cpp)"; }
  MemoryKind memory_kind(const void* p) override {
    std::lock_guard<std::mutex> lock(device_mutex);
    const auto* c = static_cast<const char*>(p);
    auto it = device.upper_bound(c);
    if (it == device.begin()) return MemoryKind::kHost;
    --it;
    return c < it->first + it->second ? MemoryKind::kDevice : MemoryKind::kHost;
  }
  bool capturing(void*) override { return false; }
  std::unique_ptr<Module> load(const softdla::Model&) override {
    throw std::runtime_error("the fake GPU prepares no model");
  }
  void* alloc_device(size_t bytes) override { return ::operator new(bytes ? bytes : 1); }
  void free_device(void* p) override { ::operator delete(p); }
  void synchronize(void*) override { stream_.drain(); }

  std::atomic<bool> failed{false};
  std::atomic<long> pinned_live{0};
  std::mutex device_mutex;
  std::map<const char*, size_t> device;  // marked ranges

 private:
  Stream stream_;
};

FakePlatform& fake() {
  static FakePlatform p;
  return p;
}

}  // namespace

#define FAKE_GPU_EXPORT extern "C" __attribute__((visibility("default")))

FAKE_GPU_EXPORT Platform* softdla_gpu_create_platform(int abi, std::string* why) {
  if (abi != kGpuAbi) {
    *why = "fake GPU plugin of another softdla build";
    return nullptr;
  }
  return &fake();
}

// The test's side (it finds these with dlsym in the plugin libcudla loaded).
FAKE_GPU_EXPORT void fake_gpu_mark_device(const void* p, size_t bytes) {
  std::lock_guard<std::mutex> lock(fake().device_mutex);
  fake().device[static_cast<const char*>(p)] = bytes;
}
FAKE_GPU_EXPORT void fake_gpu_synchronize() { fake().synchronize(nullptr); }
FAKE_GPU_EXPORT int fake_gpu_take_failure() { return fake().failed.exchange(false) ? 1 : 0; }
FAKE_GPU_EXPORT long fake_gpu_pinned_live() { return fake().pinned_live.load(); }
