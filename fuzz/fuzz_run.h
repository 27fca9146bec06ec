// What the runtime-facing fuzz targets share: run one task of a loaded module on host buffers sized
// from the module's own tensor descriptors.
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include <span>
#include <variant>

#include "cudla.h"
#include "fuzz_limits.h"
#include "loadable.h"

namespace softdla::fuzz {

// Host buffers are 64-byte aligned and rounded up, as cudlaMemRegister callers must provide.
struct HostBuffer {
  explicit HostBuffer(uint64_t n)
      : bytes(size_t((n + 63) / 64 * 64)), data(static_cast<uint8_t*>(std::aligned_alloc(64, bytes))) {
    std::memset(data, 0x5a, bytes);  // deterministic, non-zero input
  }
  ~HostBuffer() { std::free(data); }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  size_t bytes;
  uint8_t* data;
};

inline bool tensor_descriptors(cudlaModule module, bool inputs, std::vector<cudlaModuleTensorDescriptor>& out) {
  cudlaModuleAttribute a{};
  if (cudlaModuleGetAttributes(module, inputs ? CUDLA_NUM_INPUT_TENSORS : CUDLA_NUM_OUTPUT_TENSORS, &a) != cudlaSuccess)
    return false;
  const uint32_t n = inputs ? a.numInputTensors : a.numOutputTensors;
  if (n > kMaxBindings) return false;
  out.resize(n);
  if (n == 0) return true;
  a.inputTensorDesc = out.data();  // the same union member serves both descriptor kinds
  return cudlaModuleGetAttributes(module, inputs ? CUDLA_INPUT_TENSOR_DESCRIPTORS : CUDLA_OUTPUT_TENSOR_DESCRIPTORS,
                                  &a) == cudlaSuccess;
}

// An estimate of one task's arithmetic: per op, its output elements times the weights behind each
// (convolutions) or the window (pools). 0 when the loadable does not verify (the load will fail).
inline uint64_t task_work(std::span<const uint8_t> bytes) {
  Model m;
  try {
    m = read_loadable(bytes);
  } catch (...) {
    return 0;
  }
  uint64_t work = 0;
  for (const Op& op : m.ops) {
    const Shape& out = m.tensors[op.outputs[0]].shape;
    uint64_t per = 1;
    uint32_t weights = UINT32_MAX;
    if (const auto* c = std::get_if<ConvParams>(&op.params)) weights = c->weights;
    if (const auto* d = std::get_if<DeconvParams>(&op.params)) weights = d->weights;
    if (weights != UINT32_MAX) {
      uint64_t w = 1;
      for (uint32_t v : m.constants[weights].dims) w *= v;
      per = w / std::max<uint64_t>(1, out[1]);
    } else if (const auto* p = std::get_if<PoolParams>(&op.params)) {
      per = uint64_t(p->kernel_h) * p->kernel_w;
    } else {
      per = 1;
    }
    work += element_count(out) * std::max<uint64_t>(per, 1);
  }
  return work;
}

// The hybrid-mode device every runtime-facing target uses (the CPU engine: quiet_environment()).
inline cudlaDevHandle open_device() {
  quiet_environment();
  cudlaDevHandle device = nullptr;
  if (cudlaCreateDevice(0, &device, CUDLA_CUDA_DLA) != cudlaSuccess) std::abort();
  return device;
}

// Registers a buffer for every binding of `module` and runs one synchronous task (no stream: the CPU
// engine). A model whose I/O is above kMaxIoBytes is loaded but not run. Every registration is undone.
inline void run_module(cudlaDevHandle device, cudlaModule module) {
  std::vector<cudlaModuleTensorDescriptor> ins, outs;
  if (!tensor_descriptors(module, true, ins) || !tensor_descriptors(module, false, outs)) return;
  uint64_t total = 0;
  for (const auto* v : {&ins, &outs})
    for (const auto& d : *v) {
      if (d.size > kMaxIoBytes) return;
      total += d.size;
    }
  if (total > kMaxIoBytes) return;

  std::vector<std::unique_ptr<HostBuffer>> buffers;
  std::vector<uint64_t*> registered;
  bool all_registered = true;
  auto reg = [&](uint64_t size) {
    buffers.push_back(std::make_unique<HostBuffer>(size == 0 ? 64 : size));
    uint64_t* dla = nullptr;
    if (cudlaMemRegister(device, reinterpret_cast<uint64_t*>(buffers.back()->data), buffers.back()->bytes, &dla, 0) !=
        cudlaSuccess)
      all_registered = false;
    registered.push_back(dla);
    return dla;
  };
  std::vector<const uint64_t*> in_ptrs;
  std::vector<uint64_t*> out_ptrs;
  for (const auto& d : ins) in_ptrs.push_back(reg(d.size));
  for (const auto& d : outs) out_ptrs.push_back(reg(d.size));
  if (all_registered) {
    cudlaTask task{};
    task.moduleHandle = module;
    task.numInputTensors = uint32_t(in_ptrs.size());
    task.inputTensor = in_ptrs.data();
    task.numOutputTensors = uint32_t(out_ptrs.size());
    task.outputTensor = out_ptrs.data();
    (void)cudlaSubmitTask(device, &task, 1, nullptr, 0);
  }
  for (uint64_t* dla : registered)
    if (dla && cudlaMemUnregister(device, dla) != cudlaSuccess) std::abort();  // a live registration must go
}

}  // namespace softdla::fuzz
