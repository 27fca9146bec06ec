#include "softdla/engine_c.h"

#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "backend.h"
#include "cpu_isa.h"
#include "gpu_backend.h"
#include "loadable.h"
#include "log.h"

// A loaded model, prepared on one backend on first need: the CUDA backend when softdla_engine_use_gpu
// asks for it, else the CPU backend at the first call that runs it or asks about its kernels. The
// backend prepares a copy, so the model stays here unchanged (and readable without the lock) whether
// or not a preparation fails.
struct softdla_engine {
  explicit softdla_engine(softdla::Model m) : loaded(std::move(m)) {}
  const softdla::Model& model() const { return loaded; }
  softdla::PreparedModule& ready() {
    std::lock_guard<std::mutex> lock(mutex);  // runs were thread-safe before the first one prepared
    if (!prepared) prepare(softdla::make_cpu_backend(nullptr));
    return *prepared;
  }
  void prepare(std::unique_ptr<softdla::Backend> b) {  // caller holds mutex
    prepared = b->prepare(loaded);
    backend = std::move(b);
  }
  const softdla::Model loaded;
  mutable std::mutex mutex;
  std::unique_ptr<softdla::Backend> backend;
  std::unique_ptr<softdla::PreparedModule> prepared;
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
  return e ? uint32_t(e->model().inputs.size()) : 0;
}
extern "C" uint32_t softdla_engine_num_outputs(const softdla_engine* e) {
  return e ? uint32_t(e->model().outputs.size()) : 0;
}

extern "C" int softdla_engine_op_fused(const softdla_engine* e, uint32_t op) {
  if (!e) return 0;
  try {
    return const_cast<softdla_engine*>(e)->ready().op_fused(op) ? 1 : 0;
  } catch (const std::exception& ex) {
    report("op_fused", ex.what(), nullptr, 0);
    return 0;
  }
}

extern "C" uint64_t softdla_engine_io_size(const softdla_engine* e, int is_output, uint32_t i) {
  if (!e) return 0;
  const auto& list = is_output ? e->model().outputs : e->model().inputs;
  return i < list.size() ? list[i].desc.size : 0;
}

extern "C" int softdla_engine_io_info(const softdla_engine* e, int is_output, uint32_t i, softdla_io_info* info) {
  if (!e || !info) return 1;
  const auto& m = e->model();
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
  std::lock_guard<std::mutex> lock(e->mutex);
  if (e->prepared) return report("use_gpu", "the engine already runs on a backend; load it again", err, errlen);
  softdla::gpu::Platform* gpu = softdla::gpu::platform();
  if (!gpu) return report("use_gpu", "no CUDA backend: " + softdla::gpu::unavailable_reason(), err, errlen);
  try {
    e->prepare(softdla::make_cuda_backend(*gpu, nullptr));  // after a failure, the CPU backend prepares later
    return 0;
  } catch (const std::exception& ex) {
    return report("use_gpu", ex.what(), err, errlen);
  }
}

namespace {
// Runs one task now and keeps its outcome (no deadline; numbered 0).
struct OneTask final : softdla::TaskMonitor {
  Start start() override { return {}; }
  void finish(uint64_t, const softdla::TaskOutcome& o) override { outcome = o; }
  softdla::TaskOutcome outcome;
};
}  // namespace

extern "C" int softdla_engine_run(softdla_engine* e, const void* const* inputs, void* const* outputs,
                                  char* err, size_t errlen) {
  if (!e || !inputs || !outputs) return report("run", "null engine or buffer list", err, errlen);
  try {
    softdla::PreparedModule& module = e->ready();
    const auto& m = module.model();
    softdla::TaskIo io;
    io.inputs.assign(inputs, inputs + m.inputs.size());
    io.outputs.assign(outputs, outputs + m.outputs.size());
    OneTask monitor;
    module.enqueue({&io, 1}, std::nullopt, monitor, nullptr);
    if (monitor.outcome.result != softdla::TaskResult::kDone) return report("run", monitor.outcome.message, err, errlen);
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
