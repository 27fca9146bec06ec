// The profile, times and timeline exports (profile_export.h).
#include "profile_export.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "error.h"
#include "json_writer.h"
#include "layer_info.h"

namespace softdla::cli {
namespace {

// A string as JSON (layer names come from the loadable and may hold any bytes: json_quote escapes what
// must be and replaces invalid UTF-8).
std::string str(const std::string& s) { return json_quote(s); }

// A number with `decimals` places (times: ms to the ns, trace timestamps: us to the ns); null if not finite.
std::string num(double v, int decimals = 6) {
  if (!std::isfinite(v)) return "null";
  char text[400];
  std::snprintf(text, sizeof text, "%.*f", decimals, v);
  return text;
}

}  // namespace

std::string outputs_json(const Model& m, const std::vector<std::vector<float>>& outputs, size_t batches) {
  std::string out = "[\n";
  for (size_t i = 0; i < m.outputs.size() && i < outputs.size(); ++i) {
    const Tensor& t = m.tensors[m.outputs[i].tensor];
    out += std::string(i ? ", " : "  ") + "{ \"name\" : " + str(t.name) + "\n  , \"dimensions\" : \"" +
           std::to_string(uint64_t(t.shape[0]) * batches) + "x" + std::to_string(t.shape[1]) + "x" +
           std::to_string(t.shape[2]) + "x" + std::to_string(t.shape[3]) + "\"\n  , \"values\" : [ ";
    for (size_t k = 0; k < outputs[i].size(); ++k) {
      char text[32] = "null";
      if (std::isfinite(outputs[i][k])) std::snprintf(text, sizeof text, "%.9g", double(outputs[i][k]));
      out += (k ? ", " : "") + std::string(text);
    }
    out += " ]\n  }\n";
  }
  return out + "]\n";
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

std::string layer_info_export_json(const std::string& path, const Model& m) {
  return "{\"loadable\": " + str(path) + ",\n\"layers\": " + layer_info_json(m) + "}\n";
}

std::string profile_json(const Model& m, const std::vector<TaskTiming>& runs) {
  // Each layer's time in each run: end - start of its statistics record.
  std::vector<std::vector<double>> per_layer(m.ops.size());
  for (const TaskTiming& t : runs)
    for (const LayerTime& l : t.layers) per_layer[l.layer].push_back(std::max(0.0, l.end_ms - l.start_ms));
  double all = 0;
  std::vector<double> totals(m.ops.size(), 0);
  for (size_t i = 0; i < m.ops.size(); ++i) {
    for (double d : per_layer[i]) totals[i] += d;
    all += totals[i];
  }
  std::string j = "[\n  {\"count\": " + std::to_string(runs.size()) + "}";
  for (size_t i = 0; i < m.ops.size(); ++i) {
    const size_t n = per_layer[i].size();
    j += ",\n  {\"name\": " + str(m.ops[i].name) + ", \"timeMs\": " + num(totals[i]) +
         ", \"averageMs\": " + num(n ? totals[i] / double(n) : 0) + ", \"medianMs\": " + num(median(per_layer[i])) +
         ", \"percentage\": " + num(all > 0 ? 100.0 * totals[i] / all : 0, 4) + "}";
  }
  return j + "\n]\n";
}

std::string times_json(const std::vector<TaskTiming>& runs) {
  std::string j = "[";
  for (size_t i = 0; i < runs.size(); ++i) {
    const TaskTiming& t = runs[i];
    j += std::string(i ? "," : "") + "\n  {\"startMs\": " + num(t.start_ms) + ", \"endMs\": " + num(t.end_ms) +
         ", \"latencyMs\": " + num(t.end_ms - t.start_ms) + ", \"batch\": " + std::to_string(t.batch) + "}";
  }
  return j + "\n]\n";
}

std::string trace_json(const Model& m, const TraceInfo& info, const std::vector<TaskTiming>& runs) {
  // One process, a row (thread) per kind of event; ts and dur in microseconds from the first task.
  constexpr int kPid = 1, kTasks = 1, kLayers = 2, kStream = 3;
  const bool stream = std::any_of(runs.begin(), runs.end(), [](const TaskTiming& t) { return t.has_stream; });
  std::vector<std::string> events;
  auto meta = [&](const char* what, int tid, const std::string& args) {
    events.push_back("{\"name\": \"" + std::string(what) + "\", \"ph\": \"M\", \"pid\": " + std::to_string(kPid) +
                     ", \"tid\": " + std::to_string(tid) + ", \"args\": {" + args + "}}");
  };
  auto row = [&](int tid, const std::string& name) {
    meta("thread_name", tid, "\"name\": " + str(name));
    meta("thread_sort_index", tid, "\"sort_index\": " + std::to_string(tid));
  };
  meta("process_name", 0,
       "\"name\": " + str("softdla " + info.loadable + " (" + info.backend + " backend, " + info.device + ", DLA core " +
                          std::to_string(info.dla_core) + ")"));
  row(kTasks, "tasks (cudlaSubmitTask to completion, host clock)");
  row(kLayers, "layers (layer-wise statistics)");
  if (stream) row(kStream, "CUDA stream (task between CUDA events)");
  auto complete = [&](const std::string& name, const char* cat, int tid, double start_ms, double end_ms,
                      const std::string& args) {
    events.push_back("{\"name\": " + str(name) + ", \"cat\": \"" + cat + "\", \"ph\": \"X\", \"ts\": " +
                     num(start_ms * 1000, 3) + ", \"dur\": " + num(std::max(0.0, end_ms - start_ms) * 1000, 3) +
                     ", \"pid\": " + std::to_string(kPid) + ", \"tid\": " + std::to_string(tid) + ", \"args\": {" +
                     args + "}}");
  };
  for (size_t i = 0; i < runs.size(); ++i) {
    const TaskTiming& t = runs[i];
    const std::string task = "\"task\": " + std::to_string(i) + ", \"batch\": " + std::to_string(t.batch);
    complete("task " + std::to_string(i), "task", kTasks, t.start_ms, t.end_ms,
             task + (t.has_statistics ? ", \"dlaTaskMs\": " + num(t.task_ms) : std::string()));
    // Layer times count from the task's own start, which the host sees only from outside: inside
    // cudlaSubmitTask on the CPU, between the CUDA events on the GPU. The task ends just before that span
    // does (the call returns, the end event follows), so its start is placed the statistics' task time
    // before the span's end: the layers then lie within the span, drawn early by at most the time the task
    // spends before its first layer (the input format conversion).
    const double span_start = t.has_stream ? t.stream_start_ms : t.start_ms;
    const double span_end = t.has_stream ? t.stream_end_ms : t.end_ms;
    const double base = std::max(span_start, span_end - t.task_ms);
    if (t.has_stream) complete("task " + std::to_string(i), "stream", kStream, t.stream_start_ms, t.stream_end_ms, task);
    for (const LayerTime& l : t.layers)
      complete(m.ops[l.layer].name, "layer", kLayers, base + l.start_ms, base + l.end_ms,
               task + ", \"layer\": " + std::to_string(l.layer) + ", \"kind\": " + str(op_kind_name(m.ops[l.layer].params)));
  }
  std::string j = "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [";
  for (size_t i = 0; i < events.size(); ++i) j += std::string(i ? ",\n  " : "\n  ") + events[i];
  return j + "\n]}\n";
}

void write_text_file(const std::string& path, const std::string& text, const std::string& what) {
  std::ofstream f(path, std::ios::binary);
  if (!f) fail(what, ": cannot write '", path, "'");
  f << text;
  f.close();
  if (!f) fail(what, ": writing '", path, "' failed");
}

}  // namespace softdla::cli
