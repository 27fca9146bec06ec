// Standalone tasks on the CUDA backend (a GPU machine; SOFTDLA_BACKEND as for hybrid handles). NvSciBuf
// memory is host memory here, so a task copies its inputs into device buffers the handle keeps, runs the
// module's CUDA graph on the legacy default stream, copies its outputs (and statistics) back and waits:
// all on the handle's worker thread, long after cudlaSubmitTask returned.
#include "standalone_gpu.h"

#include "log.h"

namespace softdla::rt {
namespace {

// The handle's device buffer `slot`, at least `bytes` large (kept between tasks; freed with the handle).
void* stage(DeviceState& dev, size_t slot, size_t bytes) {
  auto& buffers = dev.gpu_stage;
  if (buffers.size() <= slot) buffers.resize(slot + 1, {nullptr, 0});
  auto& [ptr, size] = buffers[slot];
  if (size < bytes) {
    if (ptr) dev.platform->free_device(ptr);
    ptr = nullptr, size = 0;
    ptr = dev.platform->alloc_device(bytes);
    size = bytes;
  }
  return ptr;
}

}  // namespace

void run_task_gpu(DeviceState& dev, const ResolvedTask& t, uint64_t index) {
  gpu::Platform& gpu = *dev.platform;
  const Model& m = t.module->engine.model();
  std::vector<const void*> inputs;
  std::vector<void*> outputs;
  size_t slot = 0;
  for (size_t i = 0; i < t.inputs.size(); ++i) {
    void* d = stage(dev, slot++, m.inputs[i].desc.size);
    gpu.copy_async(d, t.inputs[i], m.inputs[i].desc.size, nullptr);
    inputs.push_back(d);
  }
  for (size_t i = 0; i < t.outputs.size(); ++i) outputs.push_back(stage(dev, slot++, m.outputs[i].desc.size));
  void* statistics = nullptr;
  const size_t stats_bytes = t.statistics ? t.module->stats_descriptors[0].size : 0;
  if (t.statistics) statistics = stage(dev, slot++, stats_bytes);
  t.module->gpu->enqueue(inputs.data(), outputs.data(), statistics, index, nullptr);
  for (size_t i = 0; i < t.outputs.size(); ++i) gpu.copy_async(t.outputs[i], outputs[i], m.outputs[i].desc.size, nullptr);
  if (t.statistics) gpu.copy_async(t.statistics, statistics, stats_bytes, nullptr);
  gpu.synchronize(nullptr);
  if (const std::string e = t.module->gpu->poll_error(); !e.empty()) throw std::runtime_error(e);
}

void free_gpu_stage(DeviceState& dev) {
  for (auto& [ptr, size] : dev.gpu_stage)
    if (ptr) dev.platform->free_device(ptr);
  dev.gpu_stage.clear();
}

}  // namespace softdla::rt
