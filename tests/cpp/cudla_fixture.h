// Shared helpers of the cuDLA API tests: a tiny one-op loadable, aligned host buffers, a ready handle.
#pragma once
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "cudla.h"
#include "loadable.h"

namespace softdla::testing {

// y = relu(x + bias) on a 1x8x4x4 int8 tensor (linear I/O), with requant multiplier 1 (identity).
inline std::vector<uint8_t> tiny_loadable(uint32_t channels = 8) {
  Model m;
  m.tensors.push_back({"x", {1, channels, 4, 4}, DataType::kInt8, 0.1f, -1});
  m.tensors.push_back({"y", {1, channels, 4, 4}, DataType::kInt8, 0.1f, -1});
  SdpParams p;
  SdpStep bias, relu;
  bias.kind = SdpKind::kBias;
  bias.ivalues = {5};
  relu.kind = SdpKind::kRelu;
  p.steps = {bias, relu};
  p.requant = {{1}, {0}};
  m.ops.push_back({"bias + relu", {0}, {1}, p});
  m.inputs.push_back({0, TensorFormat::kLinear, {}});
  m.outputs.push_back({1, TensorFormat::kLinear, {}});
  return write_loadable(m);
}

// Expected output of tiny_loadable for input x.
inline int8_t tiny_expected(int8_t x) {
  const int v = x + 5;
  return int8_t(v < 0 ? 0 : (v > 127 ? 127 : v));
}

struct AlignedBuffer {
  explicit AlignedBuffer(size_t n) : size(n), data(static_cast<uint8_t*>(std::aligned_alloc(64, (n + 63) / 64 * 64))) {}
  ~AlignedBuffer() { std::free(data); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  size_t size;
  uint8_t* data;
  const uint64_t* ptr() const { return reinterpret_cast<const uint64_t*>(data); }
};

// A hybrid handle with tiny_loadable loaded and one registered input and output.
struct Ready {
  explicit Ready(uint64_t core = 0) : in(128), out(128) {
    const auto bytes = tiny_loadable();
    EXPECT_EQ(cudlaCreateDevice(core, &dev, CUDLA_CUDA_DLA), cudlaSuccess);
    EXPECT_EQ(cudlaModuleLoadFromMemory(dev, bytes.data(), bytes.size(), &module, 0), cudlaSuccess);
    EXPECT_EQ(cudlaMemRegister(dev, in.ptr(), in.size, &in_dla, 0), cudlaSuccess);
    EXPECT_EQ(cudlaMemRegister(dev, out.ptr(), out.size, &out_dla, 0), cudlaSuccess);
    std::memset(&task, 0, sizeof task);
    task.moduleHandle = module;
    task.numInputTensors = 1;
    task.inputTensor = inputs;
    task.numOutputTensors = 1;
    task.outputTensor = outputs;
  }
  ~Ready() {
    if (dev) cudlaDestroyDevice(dev);
  }
  cudlaDevHandle dev = nullptr;
  cudlaModule module = nullptr;
  AlignedBuffer in, out;
  uint64_t* in_dla = nullptr;
  uint64_t* out_dla = nullptr;
  const uint64_t* inputs[1] = {nullptr};
  uint64_t* outputs[2] = {nullptr, nullptr};
  cudlaTask task{};
  cudlaTask& prepared() {
    inputs[0] = in_dla;
    outputs[0] = out_dla;
    return task;
  }
};

}  // namespace softdla::testing
