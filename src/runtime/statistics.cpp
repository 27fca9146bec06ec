// Layer-wise statistics buffers (written by tasks, docs/RUNTIME.md) translated to CSV: softdla's
// softdlaTranslateStatistics ("layer_name,start_ms,end_ms", measured ms) and the export table of
// cudlaExternalEtbl.hpp (NVIDIA's layer-wise samples: the same columns, times from the caller's DLA clock).
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cudlaExternalEtbl.hpp"
#include "guard.h"
#include "runtime_state.h"
#include "softdla/cudla_ext.h"

using namespace softdla;
using namespace softdla::rt;

namespace {

constexpr size_t kUnknownSize = ~size_t(0);

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

// The layer-name column of the export table's CSV: always in single quotes, as NVIDIA's samples print
// it; a quote inside a name is doubled (CSV quoting with ' as the quote character).
std::string quoted_name(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("''") : std::string(1, c);
  return q + "'";
}

// ",start,end\n" in ms with 6 decimals (any double fits the buffer: %.6f of 1e308 is 316 characters).
void append_times(std::string& text, double start_ms, double end_ms) {
  char times[700];
  std::snprintf(times, sizeof times, ",%.6f,%.6f\n", start_ms, end_ms);
  text += times;
}

// The records of a statistics buffer written by a task of model m, checked. `size` is the buffer's size
// when the caller gave one; kUnknownSize means the caller vouches for the descriptor's size.
cudlaStatus read_records(const char* fn, const Model& m, const void* buffer, size_t size,
                         std::vector<softdlaStatsRecord>& records) {
  softdlaStatsHeader h;
  if (size < sizeof h) return fail_status(cudlaErrorInvalidParam, fn, "buffer smaller than the statistics header");
  std::memcpy(&h, buffer, sizeof h);
  if (std::memcmp(h.magic, SOFTDLA_STATS_MAGIC, 8) != 0 || h.version != SOFTDLA_STATS_VERSION)
    return fail_status(cudlaErrorInvalidParam, fn,
                       "not a statistics buffer written by a task (was it registered with CUDLA_TASK_STATISTICS and "
                       "passed after the outputs?)");
  if (h.numLayers != m.ops.size() ||
      (size != kUnknownSize && size < sizeof h + h.numLayers * sizeof(softdlaStatsRecord)))
    return fail_status(cudlaErrorInvalidParam, fn, "statistics buffer does not belong to this module");
  records.resize(h.numLayers);
  for (uint32_t i = 0; i < h.numLayers; ++i) {
    std::memcpy(&records[i], static_cast<const uint8_t*>(buffer) + sizeof h + i * sizeof(softdlaStatsRecord),
                sizeof(softdlaStatsRecord));
    if (records[i].layerIndex >= m.ops.size()) return fail_status(cudlaErrorInvalidParam, fn, "corrupt layer index");
  }
  return cudlaSuccess;
}

cudlaStatus translate_stats(cudlaDevHandle const devHandle, const void* const statsBuffer, uint32_t const dlaFreqInMHz,
                            uint32_t const statsIndex, cudlaTranslateCsvAttributeType const type,
                            cudlaTranslateCsvAttribute* const attribute) {
  static const char* fn = "etiTranslateStats";
  return guarded(fn, [&] {
    const auto dev = find_device(devHandle);
    if (!dev) return fail_status(cudlaErrorInvalidDevice, fn, "not a live device handle");
    const int mode = enum_value(type);
    if (mode != CUDLA_GET_CSV_LENGTH && mode != CUDLA_GET_CSV_STATS)
      return fail_status(cudlaErrorInvalidAttribute, fn, "unknown attribute type ", mode,
                         " (CUDLA_GET_CSV_LENGTH or CUDLA_GET_CSV_STATS)");
    if (!attribute) return fail_status(cudlaErrorInvalidParam, fn, "attribute is NULL");
    if (!statsBuffer) return fail_status(cudlaErrorInvalidParam, fn, "statistics buffer is NULL");
    if (dlaFreqInMHz == 0) return fail_status(cudlaErrorInvalidParam, fn, "DLA frequency is 0 MHz");
    std::shared_ptr<ModuleState> mod;
    {
      std::lock_guard<std::mutex> lock(dev->state_mutex);
      mod = dev->module;
    }
    if (!mod)
      return fail_status(cudlaErrorInvalidModule, fn, "no module is loaded on this handle: the layer names come from "
                                                      "the module whose task wrote the statistics");
    if (statsIndex >= mod->stats_descriptors.size())
      return fail_status(cudlaErrorInvalidParam, fn, "statistics index ", statsIndex, ", the module has ",
                         mod->stats_descriptors.size(), " (CUDLA_NUM_OUTPUT_TASK_STATISTICS)");
    const Model& m = mod->model();
    std::vector<softdlaStatsRecord> records;
    if (const cudlaStatus s = read_records(fn, m, statsBuffer, kUnknownSize, records); s != cudlaSuccess) return s;
    // Recorded times are cycles of the SOFTDLA_STATS_CLOCK_MHZ counter (in ms at that clock).
    const double scale = double(SOFTDLA_STATS_CLOCK_MHZ) / double(dlaFreqInMHz);
    std::string text = "layer_name,start_ms,end_ms\n";
    for (const softdlaStatsRecord& r : records) {
      text += quoted_name(m.ops[r.layerIndex].name);
      append_times(text, r.startMs * scale, r.endMs * scale);
    }
    const uint64_t need = text.size() + 1;
    if (mode == CUDLA_GET_CSV_LENGTH) {
      attribute->csvStreamLength = need;
      return cudlaSuccess;
    }
    if (!attribute->csvStreamStats) return fail_status(cudlaErrorInvalidParam, fn, "csvStreamStats is NULL");
    if (attribute->csvStreamLength < need) {
      const uint64_t had = attribute->csvStreamLength;
      attribute->csvStreamLength = need;
      return fail_status(cudlaErrorInvalidParam, fn, "csvStreamLength is ", had, " bytes, the CSV needs ", need,
                         " (ask with CUDLA_GET_CSV_LENGTH)");
    }
    std::memcpy(attribute->csvStreamStats, text.c_str(), need);
    attribute->csvStreamLength = need;
    return cudlaSuccess;
  });
}

const cudlaExternalEtbl kExportTable = {sizeof(cudlaExternalEtbl), translate_stats};

}  // namespace

extern "C" cudlaStatus cudlaGetExternalExportTable(const cudlaExternalEtbl** const etbl, uint32_t const flags) {
  static const char* fn = "cudlaGetExternalExportTable";
  return guarded(fn, [&] {
    if (!etbl) return fail_status(cudlaErrorInvalidParam, fn, "etbl is NULL");
    if (flags != 0) return fail_status(cudlaErrorInvalidParam, fn, "flags must be 0, got ", flags);
    *etbl = &kExportTable;
    return cudlaSuccess;
  });
}

extern "C" cudlaStatus softdlaTranslateStatistics(cudlaModule const hModule, const void* const buffer,
                                                  size_t const size, char* const csv, size_t* const csvSize) {
  static const char* fn = "softdlaTranslateStatistics";
  return guarded(fn, [&] {
    if (!buffer || !csvSize) return fail_status(cudlaErrorInvalidParam, fn, "buffer and csvSize must be set");
    const auto mod = find_module(hModule);
    if (!mod) return fail_status(cudlaErrorInvalidModule, fn, "not a loaded module handle");
    const Model& m = mod->model();
    std::vector<softdlaStatsRecord> records;
    if (const cudlaStatus s = read_records(fn, m, buffer, size, records); s != cudlaSuccess) return s;
    std::string text = "layer_name,start_ms,end_ms\n";
    for (const softdlaStatsRecord& r : records) {
      text += csv_field(m.ops[r.layerIndex].name);
      append_times(text, r.startMs, r.endMs);
    }
    return copy_text_out(fn, text, csv, csvSize);
  });
}
