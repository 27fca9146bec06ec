#include "softdla/engine_c.h"

#include <cstdio>
#include <cstring>
#include <exception>
#include <span>
#include <string>
#include <vector>

#include "cpu_isa.h"
#include "engine.h"
#include "gpu_backend.h"
#include "loadable.h"
#include "log.h"

struct softdla_engine {
  explicit softdla_engine(softdla::Model m) : engine(std::move(m)) {}
  ~softdla_engine() {
    for (void* p : device_buffers) softdla::gpu::platform()->free_device(p);
  }
  softdla::Engine engine;
  std::unique_ptr<softdla::gpu::Module> gpu;  // set by softdla_engine_use_gpu
  std::vector<void*> device_buffers;          // inputs then outputs, on the GPU
};

namespace {
int report(const char* what, const std::string& msg, char* err, size_t errlen) {
  softdla::log(softdla::LogLevel::kError, what, ": ", msg);
  if (err && errlen) {
    std::strncpy(err, msg.c_str(), errlen - 1);
    err[errlen - 1] = '\0';
  }
  return 1;
}
}  // namespace

extern "C" int softdla_engine_load(const uint8_t* data, size_t size, softdla_engine** out, char* err,
                                   size_t errlen) {
  if (!out) return report("load", "out pointer is null", err, errlen);
  *out = nullptr;
  if (!data) return report("load", "loadable pointer is null", err, errlen);
  try {
    *out = new softdla_engine(softdla::read_loadable({data, size}));
    return 0;
  } catch (const std::exception& e) {
    return report("load", e.what(), err, errlen);
  }
}

extern "C" void softdla_engine_free(softdla_engine* engine) { delete engine; }

extern "C" uint32_t softdla_engine_num_inputs(const softdla_engine* e) {
  return e ? uint32_t(e->engine.model().inputs.size()) : 0;
}
extern "C" uint32_t softdla_engine_num_outputs(const softdla_engine* e) {
  return e ? uint32_t(e->engine.model().outputs.size()) : 0;
}

extern "C" int softdla_engine_op_fused(const softdla_engine* e, uint32_t op) {
  return e && e->engine.op_fused(op) ? 1 : 0;
}

extern "C" uint64_t softdla_engine_io_size(const softdla_engine* e, int is_output, uint32_t i) {
  if (!e) return 0;
  const auto& list = is_output ? e->engine.model().outputs : e->engine.model().inputs;
  return i < list.size() ? list[i].desc.size : 0;
}

extern "C" int softdla_engine_io_info(const softdla_engine* e, int is_output, uint32_t i, softdla_io_info* info) {
  if (!e || !info) return 1;
  const auto& m = e->engine.model();
  const auto& list = is_output ? m.outputs : m.inputs;
  if (i >= list.size()) return 1;
  const softdla::Tensor& t = m.tensors[list[i].tensor];
  std::memset(info, 0, sizeof *info);
  std::strncpy(info->name, t.name.c_str(), sizeof info->name - 1);
  info->n = t.shape[0], info->c = t.shape[1], info->h = t.shape[2], info->w = t.shape[3];
  info->dtype = uint32_t(t.dtype);
  info->format = uint32_t(list[i].format);
  info->target = uint32_t(m.target);
  info->scale = t.scale;
  info->size = list[i].desc.size;
  return 0;
}

extern "C" int softdla_gpu_available(char* why, size_t len) {
  if (softdla::gpu::platform()) {
    if (why && len) std::snprintf(why, len, "%s", softdla::gpu::platform()->describe().c_str());
    return 1;
  }
  if (why && len) std::snprintf(why, len, "%s", softdla::gpu::unavailable_reason().c_str());
  return 0;
}

extern "C" int softdla_engine_use_gpu(softdla_engine* e, char* err, size_t errlen) {
  if (!e) return report("use_gpu", "null engine", err, errlen);
  softdla::gpu::Platform* gpu = softdla::gpu::platform();
  if (!gpu) return report("use_gpu", "no CUDA backend: " + softdla::gpu::unavailable_reason(), err, errlen);
  try {
    const auto& m = e->engine.model();
    e->gpu = gpu->load(m);
    for (const auto* list : {&m.inputs, &m.outputs})
      for (const auto& io : *list) e->device_buffers.push_back(gpu->alloc_device(io.desc.size));
    return 0;
  } catch (const std::exception& ex) {
    return report("use_gpu", ex.what(), err, errlen);
  }
}

namespace {
// Host buffers in, host buffers out, through the GPU module (synchronous; the legacy default stream).
void run_on_gpu(softdla_engine& e, const void* const* inputs, void* const* outputs) {
  softdla::gpu::Platform& gpu = *softdla::gpu::platform();
  const auto& m = e.engine.model();
  const size_t nin = m.inputs.size();
  for (size_t i = 0; i < nin; ++i) gpu.copy_async(e.device_buffers[i], inputs[i], m.inputs[i].desc.size, nullptr);
  e.gpu->enqueue(e.device_buffers.data(), e.device_buffers.data() + nin, nullptr, 0, nullptr);
  for (size_t i = 0; i < m.outputs.size(); ++i)
    gpu.copy_async(outputs[i], e.device_buffers[nin + i], m.outputs[i].desc.size, nullptr);
  gpu.synchronize(nullptr);
  if (const std::string failure = e.gpu->poll_error(); !failure.empty()) throw std::runtime_error(failure);
}
}  // namespace

extern "C" int softdla_engine_run(softdla_engine* e, const void* const* inputs, void* const* outputs,
                                  char* err, size_t errlen) {
  if (!e || !inputs || !outputs) return report("run", "null engine or buffer list", err, errlen);
  try {
    if (e->gpu) {
      run_on_gpu(*e, inputs, outputs);
      return 0;
    }
    const auto& m = e->engine.model();
    e->engine.run(std::span<const void* const>(inputs, m.inputs.size()),
                  std::span<void* const>(outputs, m.outputs.size()));
    return 0;
  } catch (const std::exception& ex) {
    return report("run", ex.what(), err, errlen);
  }
}

// The CPU backend's INT8 instruction-set path, e.g. "avx512vnni (detected: avx512vnni)" (cpu_isa.h).
extern "C" const char* softdla_engine_cpu_isa(void) {
  static const std::string text = softdla::cpu::describe_isa();
  return text.c_str();
}
