// The softdla builder as a library: ONNX model bytes -> DLA loadable (the job of
// `trtexec --buildDLAStandalone`), and the per-node capability check.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "model.h"

namespace softdla::builder {

enum class PrecisionConstraints { kNone, kPrefer, kObey };

struct BuildOptions {
  bool fp16 = false;                  // allow FP16
  bool int8 = false;                  // allow INT8 (with scales)
  bool fp32_reference = false;        // softdla only: an FP32 reference loadable (not a DLA precision)
  Target target = Target::kOrin;
  std::string input_formats, output_formats;           // trtexec grammar, e.g. "int8:dla_hwc4"
  std::map<std::string, std::string> layer_precisions;  // ONNX node name -> "fp16" | "int8"
  PrecisionConstraints constraints = PrecisionConstraints::kNone;
  std::string calib_cache;            // read scales from this TensorRT cache if it exists
  std::string calib_data;             // directory of .npy/.npz calibration inputs
  std::string calibrator = "auto";  // auto | entropy | minmax | percentile | mse (calibrate.h)
  double percentile = 99.99;
  std::string write_calib_cache;      // write the scales used here
  std::map<std::string, std::vector<int64_t>> shapes;   // fix dynamic input shapes (--shapes)
  // softdla compare: every op output that is not a graph output also becomes an output binding (named
  // after its tensor, in its producer's precision, dla_linear), appended after the real outputs. Fusion,
  // precisions and scales are those of the same build without it.
  bool expose_intermediates = false;
  std::string flags_text;             // recorded in the loadable's build info
  std::function<void(const std::string& stage, size_t done, size_t total)> progress;
  std::function<void(const std::string& line)> verbose;  // per-layer decisions, if set
};

struct LayerReport {
  std::string name, kind, precision;
  std::string output;  // the layer's output tensor (its ONNX value name where it has one)
};

struct BuildResult {
  std::vector<uint8_t> loadable;
  std::vector<LayerReport> layers;
  std::map<std::string, float> scales;  // tensor -> INT8 scale used (amax / 127)
  // What the user should hear whatever the verbosity: the build went through, but not as the flags may
  // suggest (layers left in FP16 for want of an INT8 scale, flags that had no effect).
  std::vector<std::string> warnings;
};

BuildResult build(const std::vector<uint8_t>& onnx, const BuildOptions& options);

struct CheckRow {
  std::string node, op;
  bool supported = true;
  std::string reason;  // the rule that fails and what would fix it
};

// Every node of the model with whether it runs on the DLA and, if not, why and how to fix it.
std::vector<CheckRow> check(const std::vector<uint8_t>& onnx, Target target,
                            const std::map<std::string, std::vector<int64_t>>& shapes = {});

}  // namespace softdla::builder
