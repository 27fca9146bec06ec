// Stream-ordered hybrid tasks on a machine without a GPU, through libcudla.so.1 with the fake CUDA driver
// and plugin built beside this test (fake_cuda_driver.c, fake_gpu_plugin.cpp). Covers the CPU backend's CUDA stream order (device
// buffers staged through pinned memory, statistics, injected faults failing the stream, work in flight
// at unload and destroy, several submitters) and a CUDA handle whose loadable the GPU cannot prepare.
#include <dlfcn.h>

#include <cstdlib>
#include <thread>

#include "cudla_fixture.h"
#include "softdla/cudla_ext.h"

namespace softdla::testing {
namespace {

void* const kStream = reinterpret_cast<void*>(0x5d1a5);  // any value: the fake has one stream

// Before libcudla's first look for a GPU: the fake driver loaded under its soname (libcudla's
// dlopen("libcuda.so.1") then finds it, whatever the machine has), the fake plugin named.
void use_fake_gpu() {
  static const bool ready = [] {
    setenv("SOFTDLA_CUDA_PLUGIN", FAKE_GPU_PLUGIN, 1);
    return dlopen(FAKE_CUDA_DRIVER, RTLD_NOW | RTLD_GLOBAL) != nullptr;
  }();
  ASSERT_TRUE(ready) << dlerror();
}

// A function of the fake plugin (libcudla loads it with the first handle).
template <class Fn>
Fn plugin_fn(const char* name) {
  void* plugin = dlopen(FAKE_GPU_PLUGIN, RTLD_NOW | RTLD_NOLOAD);
  return plugin ? reinterpret_cast<Fn>(dlsym(plugin, name)) : nullptr;
}

class StreamOrder : public ::testing::Test {
 protected:
  void SetUp() override {
    use_fake_gpu();
    setenv("SOFTDLA_BACKEND", "cpu", 1);
  }
  void TearDown() override {
    unsetenv("SOFTDLA_BACKEND");
    unsetenv("SOFTDLA_FAULT");
  }
  static void synchronize() { plugin_fn<void (*)()>("fake_gpu_synchronize")(); }
  static bool stream_failed() { return plugin_fn<int (*)()>("fake_gpu_take_failure")() != 0; }
  static long pinned_live() { return plugin_fn<long (*)()>("fake_gpu_pinned_live")(); }
};

// A hybrid handle with tiny_loadable, its input, output and statistics buffers "device memory".
struct DeviceHandle {
  DeviceHandle() : in(128), out(128), stats(64) {
    const auto bytes = tiny_loadable();
    EXPECT_EQ(cudlaCreateDevice(0, &dev, CUDLA_CUDA_DLA), cudlaSuccess);
    EXPECT_EQ(cudlaModuleLoadFromMemory(dev, bytes.data(), bytes.size(), &module, 0), cudlaSuccess);
    const auto mark = plugin_fn<void (*)(const void*, size_t)>("fake_gpu_mark_device");
    for (const AlignedBuffer* b : {&in, &out, &stats}) mark(b->data, b->size);
    EXPECT_EQ(cudlaMemRegister(dev, in.ptr(), in.size, &in_dla, 0), cudlaSuccess);
    EXPECT_EQ(cudlaMemRegister(dev, out.ptr(), out.size, &out_dla, 0), cudlaSuccess);
    EXPECT_EQ(cudlaMemRegister(dev, stats.ptr(), stats.size, &stats_dla, CUDLA_TASK_STATISTICS), cudlaSuccess);
    for (size_t i = 0; i < in.size; ++i) in.data[i] = uint8_t(int8_t(int(i % 50) - 25));
  }
  ~DeviceHandle() {
    if (dev) cudlaDestroyDevice(dev);
  }
  cudlaStatus submit(bool statistics) {
    const uint64_t* inputs[] = {in_dla};
    uint64_t* outputs[] = {out_dla, stats_dla};
    cudlaTask t{};
    t.moduleHandle = module;
    t.inputTensor = inputs;
    t.numInputTensors = 1;
    t.outputTensor = outputs;
    t.numOutputTensors = statistics ? 2 : 1;
    return cudlaSubmitTask(dev, &t, 1, kStream, 0);
  }
  bool output_right() const {
    for (size_t i = 0; i < in.size; ++i)
      if (int8_t(out.data[i]) != tiny_expected(int8_t(in.data[i]))) return false;
    return true;
  }
  cudlaDevHandle dev = nullptr;
  cudlaModule module = nullptr;
  AlignedBuffer in, out, stats;
  uint64_t *in_dla = nullptr, *out_dla = nullptr, *stats_dla = nullptr;
};

TEST_F(StreamOrder, DeviceBuffersAreStagedAndStatisticsWritten) {
  DeviceHandle h;
  for (int k = 0; k < 12; ++k) ASSERT_EQ(h.submit(k % 2 == 1), cudlaSuccess);
  synchronize();
  EXPECT_TRUE(h.output_right());
  softdlaStatsHeader header;
  std::memcpy(&header, h.stats.data, sizeof header);
  EXPECT_EQ(std::memcmp(header.magic, SOFTDLA_STATS_MAGIC, 8), 0);
  EXPECT_EQ(header.numLayers, 1u);
  EXPECT_EQ(header.taskIndex, 11u);  // the last task with statistics
  EXPECT_EQ(cudlaGetLastError(h.dev), cudlaSuccess);
  EXPECT_FALSE(stream_failed());
}

TEST_F(StreamOrder, WorkInFlightOutlivesUnloadAndDestroyWaitsForIt) {
  {
    DeviceHandle h;
    for (int k = 0; k < 10; ++k) ASSERT_EQ(h.submit(true), cudlaSuccess);
    EXPECT_EQ(cudlaModuleUnload(h.module, 0), cudlaSuccess);
    EXPECT_EQ(cudlaDestroyDevice(h.dev), cudlaSuccess);
    h.dev = nullptr;
    EXPECT_TRUE(h.output_right());  // destroy returned after the tasks ran and their copies landed
  }
  EXPECT_EQ(pinned_live(), 0);  // staging and the fault flag freed with the handle
}

TEST_F(StreamOrder, SeveralSubmittersOnTwoHandles) {
  DeviceHandle a, b;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int k = 0; k < 40; ++k) EXPECT_EQ((t % 2 ? a : b).submit(k % 3 == 0), cudlaSuccess);
    });
  for (auto& t : threads) t.join();
  synchronize();
  EXPECT_TRUE(a.output_right());
  EXPECT_TRUE(b.output_right());
  EXPECT_EQ(cudlaGetLastError(a.dev), cudlaSuccess);
}

TEST_F(StreamOrder, InjectedFaultReachesLastErrorAndFailsTheStream) {
  DeviceHandle h;
  ASSERT_EQ(h.submit(false), cudlaSuccess);
  synchronize();
  EXPECT_FALSE(stream_failed());
  setenv("SOFTDLA_FAULT", "DataMismatch@1", 1);  // read when the task starts, on the stream
  ASSERT_EQ(h.submit(false), cudlaSuccess);
  synchronize();
  // (Its staged outputs are still copied back: on a GPU the failed stream leaves nothing readable.)
  EXPECT_EQ(cudlaGetLastError(h.dev), cudlaErrorDlaErrDataMismatch);
  EXPECT_TRUE(stream_failed());
}

TEST_F(StreamOrder, CudaHandleRunsWhatTheGpuCannotPrepareOnTheCpu) {
  setenv("SOFTDLA_BACKEND", "cuda", 1);
  DeviceHandle h;  // the fake GPU prepares nothing: the module falls back to the CPU backend
  for (int k = 0; k < 4; ++k) ASSERT_EQ(h.submit(k == 3), cudlaSuccess);
  synchronize();
  EXPECT_TRUE(h.output_right());
  EXPECT_EQ(cudlaGetLastError(h.dev), cudlaSuccess);
  AlignedBuffer host(64);
  uint64_t* dla = nullptr;
  EXPECT_EQ(cudlaMemRegister(h.dev, host.ptr(), host.size, &dla, 0), cudlaErrorInvalidAddress);  // CUDA memory only
}

}  // namespace
}  // namespace softdla::testing
