// Writes the layer-wise statistics record of docs/RUNTIME.md (include/softdla/cudla_ext.h): one
// header, then one record per layer. Shared by the CPU path (host) and the CUDA backend (a kernel).
#pragma once
#include <stdint.h>
#include <string.h>

#include "hd.h"
#include "softdla/cudla_ext.h"

namespace softdla {

// Bytes of the record of a model with `layers` ops.
inline constexpr size_t statistics_bytes(size_t layers) {
  return sizeof(softdlaStatsHeader) + layers * sizeof(softdlaStatsRecord);
}

SOFTDLA_HD inline void write_statistics_header(uint8_t* out, uint32_t layers, uint64_t task_index, double task_ms) {
  softdlaStatsHeader h{};
  memcpy(h.magic, SOFTDLA_STATS_MAGIC, 8);
  h.version = SOFTDLA_STATS_VERSION;
  h.numLayers = layers;
  h.taskIndex = task_index;
  h.taskMs = task_ms;
  memcpy(out, &h, sizeof h);
}

SOFTDLA_HD inline void write_statistics_layer(uint8_t* out, uint32_t layer, double start_ms, double end_ms) {
  const softdlaStatsRecord r{layer, 0, start_ms, end_ms};
  memcpy(out + sizeof(softdlaStatsHeader) + layer * sizeof r, &r, sizeof r);
}

}  // namespace softdla
