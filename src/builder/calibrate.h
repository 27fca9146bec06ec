// INT8 calibration: run the FP32 reference model on sample inputs, histogram every tensor and choose
// its range with TensorRT's entropy rule (EntropyCalibrator2), min-max, or a percentile.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "engine.h"
#include "model.h"

namespace softdla::builder {

// kAuto: every rule from the same histograms, and the build keeps the one whose INT8 model matches the
// FP32 reference best on the calibration samples (builder.cpp).
enum class Calibrator { kAuto, kEntropy, kMinMax, kPercentile, kMse };
Calibrator parse_calibrator(const std::string& name);

// One batch: per model input, NCHW float values of the input's full shape.
using Batch = std::vector<std::vector<float>>;

// Reads a directory of .npy (single-input models; the leading axis stacks samples) or .npz (arrays
// named after the inputs) files, sorted by name, and cuts them into batches of the model's batch size.
std::vector<Batch> load_calibration_data(const std::string& dir, const Model& fp32,
                                         const std::vector<std::string>& input_names);

using Progress = std::function<void(const std::string& stage, size_t done, size_t total)>;

// |range| per tensor of the FP32 model under each rule (0 for tensors never seen, e.g. constants).
struct RuleRanges {
  std::vector<float> entropy, minmax, percentile, mse;
  // kAuto only: the percentile rule at kTailPercentile, a candidate between --percentile and min-max.
  std::vector<float> percentile_tail;
  const std::vector<float>& of(Calibrator c) const {
    return c == Calibrator::kMinMax ? minmax : c == Calibrator::kPercentile ? percentile : c == Calibrator::kMse ? mse : entropy;
  }
};
constexpr double kTailPercentile = 99.999;

// Per output binding, one batch's outputs.
using BatchOutputs = std::vector<std::vector<float>>;

// kAuto splits the batches into this many folds (batch i in fold i % folds; fewer with fewer batches).
// load_calibration_data deals the samples so that sample s is in fold s % folds at any batch size.
constexpr size_t kCalibrationFolds = 4;

struct CalibratedRanges : RuleRanges {
  // kAuto with two or more batches: folds[k] holds every rule's ranges fitted on the batches outside
  // fold k, from the same pass and the same histogram bins, so a rule can be judged on batches that did
  // not fit it (builder.cpp) without running the FP32 model again.
  std::vector<RuleRanges> folds;
  // The FP32 model's outputs on the first `reference_batches` batches (pass 1 computes them anyway).
  std::vector<BatchOutputs> reference_outputs;
  // Per graph input (in the model's input order): the share of its non-zero calibration values that its
  // INT8 scale (the whole observed range / 127: graph inputs keep their range) rounds to 0. Near 1 when a
  // few stray values far beyond the rest set the range: INT8 then loses the input (the builder warns).
  std::vector<double> input_flushed;
};

// One FP32 run per pass over the batches. Computes the ranges of `rule` (min-max only: one pass), or of
// every rule for kAuto; the others are left at min-max.
CalibratedRanges calibrate_all(const Model& fp32, const std::vector<Batch>& batches, Calibrator rule, double percentile,
                               size_t reference_batches, const Progress& progress);

// Runs a model whose I/O is float32 linear on one batch; `outputs` per output binding (resized here).
void run_float(const Engine& e, const Batch& batch, BatchOutputs& outputs);

// |range| per tensor of the FP32 model under one rule.
std::vector<float> calibrate(const Model& fp32, const std::vector<Batch>& batches, Calibrator c,
                             double percentile, const Progress& progress);

// The range chosen from a histogram of |x| (2048 bins over [0, max]) by the entropy rule.
double entropy_threshold(const std::vector<double>& hist, double max);

// The smallest range holding `percentile` % of the histogram's values.
double percentile_threshold(const std::vector<double>& hist, double max, double percentile);

// The range that minimises the expected squared error of symmetric 8-bit quantization (rounding noise
// inside the range, clipping beyond it), estimated from the same histogram.
double mse_threshold(const std::vector<double>& hist, double max);

// TensorRT calibration caches: first line "TRT-<version>-<Calibrator>", then "<tensor>: <hex>" where
// <hex> is the big-endian IEEE float32 scale (= amax / 127).
std::map<std::string, float> read_calibration_cache(const std::string& path);  // name -> scale
// The same from the file's text (`path` names it in errors): any bytes give a map or an Error saying
// which line is wrong (bad hex, a missing ':', a duplicate tensor, a scale that is NaN or negative).
std::map<std::string, float> parse_calibration_cache(std::string_view text, const std::string& path);
void write_calibration_cache(const std::string& path, const std::map<std::string, float>& scales,
                             const std::string& calibrator_name);

}  // namespace softdla::builder
