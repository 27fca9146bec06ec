// What `softdla run --export*` and `softdla profile` write (docs/PROFILING.md has the schemas):
//  - the layer information of the loadable (--exportLayerInfo);
//  - the per-layer profile, trtexec's --exportProfile layout: [{"count": runs}, {"name", "timeMs",
//    "averageMs", "medianMs", "percentage"}, ...], one entry per layer from the layer-wise statistics;
//  - the per-run times, trtexec's --exportTimes idea: [{"startMs", "endMs", "latencyMs", "batch"}, ...];
//  - the timeline, Chrome trace / Perfetto JSON: {"traceEvents": [...]} with one row of tasks, one of
//    layers and, on the CUDA backend, one of the CUDA stream.
#pragma once
#include <string>
#include <vector>

#include "dla_session.h"
#include "model.h"

namespace softdla::cli {

// --exportLayerInfo: {"loadable": path, "layers": layer_info_json(m)} (src/loadable/layer_info.h).
std::string layer_info_export_json(const std::string& path, const Model& m);
std::string profile_json(const Model& m, const std::vector<TaskTiming>& runs);
std::string times_json(const std::vector<TaskTiming>& runs);
// trtexec's --exportOutput: [{"name", "dimensions" ("NxCxHxW"), "values"}] per output, the values `run`
// printed (float32 NCHW, INT8 outputs dequantized; every batch's one after another; null where not finite).
std::string outputs_json(const Model& m, const std::vector<std::vector<float>>& outputs, size_t batches);

struct TraceInfo {
  std::string loadable;  // path, shown in the process row's name
  std::string backend;   // cpu | cuda
  std::string device;    // "CPU" or the GPU's name
  uint64_t dla_core = 0;
};
std::string trace_json(const Model& m, const TraceInfo& info, const std::vector<TaskTiming>& runs);

// Writes `text` to `path` (`what` names the file in errors: "--exportProfile").
void write_text_file(const std::string& path, const std::string& text, const std::string& what);

// The median of `v` (the upper one of an even count, as `softdla run` has always reported).
double median(std::vector<double> v);

}  // namespace softdla::cli
