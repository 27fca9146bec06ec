// softdlaTranslateStatistics: a statistics buffer written by a task -> "layer_name,start_ms,end_ms".
#include <cstdio>
#include <cstring>
#include <string>

#include "guard.h"
#include "runtime_state.h"
#include "softdla/cudla_ext.h"

using namespace softdla;
using namespace softdla::rt;

namespace {

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

}  // namespace

extern "C" cudlaStatus softdlaTranslateStatistics(cudlaModule const hModule, const void* const buffer,
                                                  size_t const size, char* const csv, size_t* const csvSize) {
  static const char* fn = "softdlaTranslateStatistics";
  return guarded(fn, [&] {
    if (!buffer || !csvSize) return fail_status(cudlaErrorInvalidParam, fn, "buffer and csvSize must be set");
    const auto mod = find_module(hModule);
    if (!mod) return fail_status(cudlaErrorInvalidModule, fn, "not a loaded module handle");
    const Model& m = mod->engine.model();
    softdlaStatsHeader h;
    if (size < sizeof h) return fail_status(cudlaErrorInvalidParam, fn, "buffer smaller than the statistics header");
    std::memcpy(&h, buffer, sizeof h);
    if (std::memcmp(h.magic, SOFTDLA_STATS_MAGIC, 8) != 0 || h.version != SOFTDLA_STATS_VERSION)
      return fail_status(cudlaErrorInvalidParam, fn,
                         "not a statistics buffer written by a task (was it registered with CUDLA_TASK_STATISTICS and "
                         "passed after the outputs?)");
    if (h.numLayers != m.ops.size() || size < sizeof h + h.numLayers * sizeof(softdlaStatsRecord))
      return fail_status(cudlaErrorInvalidParam, fn, "statistics buffer does not belong to this module");
    std::string text = "layer_name,start_ms,end_ms\n";
    for (uint32_t i = 0; i < h.numLayers; ++i) {
      softdlaStatsRecord r;
      std::memcpy(&r, static_cast<const uint8_t*>(buffer) + sizeof h + i * sizeof r, sizeof r);
      if (r.layerIndex >= m.ops.size()) return fail_status(cudlaErrorInvalidParam, fn, "corrupt layer index");
      char times[64];
      std::snprintf(times, sizeof times, ",%.6f,%.6f\n", r.startMs, r.endMs);
      text += csv_field(m.ops[r.layerIndex].name) + times;
    }
    const size_t need = text.size() + 1;
    if (!csv) {
      *csvSize = need;
      return cudlaSuccess;
    }
    if (*csvSize < need) {
      *csvSize = need;
      return fail_status(cudlaErrorInvalidParam, fn, "csv buffer holds ", *csvSize, " bytes, needs ", need);
    }
    std::memcpy(csv, text.c_str(), need);
    *csvSize = need;
    return cudlaSuccess;
  });
}
