#include "softdla/engine_c.h"

#include <cstring>
#include <exception>
#include <span>
#include <string>

#include "engine.h"
#include "loadable.h"
#include "log.h"

struct softdla_engine {
  explicit softdla_engine(softdla::Model m) : engine(std::move(m)) {}
  softdla::Engine engine;
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

extern "C" int softdla_engine_run(softdla_engine* e, const void* const* inputs, void* const* outputs,
                                  char* err, size_t errlen) {
  if (!e || !inputs || !outputs) return report("run", "null engine or buffer list", err, errlen);
  try {
    const auto& m = e->engine.model();
    e->engine.run(std::span<const void* const>(inputs, m.inputs.size()),
                  std::span<void* const>(outputs, m.outputs.size()));
    return 0;
  } catch (const std::exception& ex) {
    return report("run", ex.what(), err, errlen);
  }
}
