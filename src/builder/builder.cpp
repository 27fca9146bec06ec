#include "builder.h"

#include <algorithm>
#include <functional>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <span>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "calibrate.h"
#include "engine.h"
#include "error.h"
#include "int8_range.h"
#include "format_version.h"
#include "io_formats.h"
#include "ir.h"
#include "loadable.h"
#include "model_checks.h"
#include "lower.h"
#include "precision.h"
#include "sdp_stage.h"
#include "sha256.h"

namespace softdla::builder {
namespace {

// A Q/DQ pair's own op (lower_qdq): no steps, its output carrying the pair's scale. Where its input is
// FP16 it is a conversion to that scale.
bool is_pair_op(const Op& op, const Lowered& low) {
  const SdpParams* pair = std::get_if<SdpParams>(&op.params);
  return pair && pair->steps.empty() && op.inputs.size() == 1 && low.qdq_amax.count(op.outputs[0]);
}

Graph prepare_graph(const std::vector<uint8_t>& onnx, const std::map<std::string, std::vector<int64_t>>& shapes,
                    std::vector<NodeIssue>* issues) {
  Graph g = import_onnx(onnx, shapes);
  infer_and_fold(g, issues);
  return g;
}

std::vector<IoChoice> io_list(const std::string& spec, size_t count, const char* what) {
  std::vector<IoChoice> f = parse_io_formats(spec);
  if (f.empty()) return std::vector<IoChoice>(count);
  if (f.size() == 1) return std::vector<IoChoice>(count, f[0]);
  if (f.size() != count) fail(what, " formats: ", f.size(), " given for ", count, " tensors (give one, or one per tensor)");
  return f;
}

// softdla compare: every op output that is not already bound as an output becomes one more output, in
// the format its producer's precision gives by default, so nothing is converted on the way out. It runs
// after the precision plan, so fusion, precisions and scales equal those of the build without it.
void expose_intermediates(Lowered& low, PrecisionPlan& plan) {
  Model& m = low.model;
  std::set<uint32_t> bound;
  for (const IoBinding& io : m.outputs) bound.insert(io.tensor);
  for (size_t i = 0; i < m.ops.size(); ++i) {
    const uint32_t t = m.ops[i].outputs[0];
    if (!bound.insert(t).second) continue;
    const DataType p = plan.op_precision[i];
    m.outputs.push_back({t, TensorFormat::kLinear, {}});
    low.output_names.push_back(m.tensors[t].name);
    plan.outputs.push_back(p == DataType::kFloat32 ? IoFormat{p, TensorFormat::kLinear} : IoFormat{p, TensorFormat::kDlaLinear});
  }
}

// Ranges no calibrator should choose: constant operands take the range of their data, and a clip's output
// takes the clip's bound where the calibration data reach at least half of it: the bound never saturates
// (no output can pass it, where a calibrated range cuts off new data's larger values and the mass piled at
// the bound) and costs at most one bit of resolution against the data's own range. An output that stays
// further below (a ReLU6 after a convolution whose outputs reach 0.1) keeps its calibrated range: the bound
// would leave it a few levels. `observed`: the calibration data's largest |x| per tensor, where softdla
// calibrated; null where the ranges came from a calibration cache, whose entries are taken as TensorRT
// takes them, as given (a clip's output given a range below its bound saturates there on the DLA too).
// A copy's or a pool's output that has no range takes its input's (tensors of the builder's own, above all).
void complete_ranges(const Lowered& low, std::vector<float>& amax, const std::vector<float>* observed) {
  const Model& fp32 = low.model;
  // Constant operands (element-wise with a constant tensor) take the range of their data. One that holds an
  // infinity has none (left at 0: its layer runs in FP16, which saturates it to +-65504, or the build
  // names it): an infinite range made an infinite scale, which the loadable's checks refused naming no
  // ONNX node, and a range of 65504 would leave its finite values at code 0.
  for (uint32_t t = 0; t < fp32.tensors.size(); ++t)
    if (const int32_t c = fp32.tensors[t].constant; c >= 0) {
      const Constant& k = fp32.constants[size_t(c)];
      float a = 0;
      for (size_t i = 0; i + 4 <= k.data.size(); i += 4) {
        float v;
        std::memcpy(&v, &k.data[i], 4);
        a = std::max(a, std::fabs(v));
      }
      amax[t] = std::isinf(a) ? 0.0f : a > 0 ? a : 1e-6f;
    }
  // A copy's or a pool's output without a range takes its input's: it stays within it. Above all for the
  // tensors the builder makes, which no cache can name (an output's copy where it aliases another I/O
  // tensor, the steps of a split global average).
  for (const Op& op : fp32.ops) {
    const uint32_t t = op.outputs[0];
    const bool keeps_range = std::holds_alternative<ShuffleParams>(op.params) || std::holds_alternative<PoolParams>(op.params);
    if (amax[t] <= 0 && keeps_range && op.inputs.size() == 1) amax[t] = amax[op.inputs[0]];
  }
  if (!observed) return;
  for (const Op& op : fp32.ops) {
    const SdpParams* post = sdp_stage(op.params);
    const uint32_t t = op.outputs[0];
    if (!post || post->steps.empty() || amax[t] <= 0 || low.qdq_amax.count(t)) continue;
    // A clip's output takes the clip's bound where the data reach half of it: nothing saturates and at
    // most a bit of resolution is lost. (Not a sigmoid's or tanh's bound of 1: EfficientNet-B0's INT8
    // cosine fell from 0.921 to 0.908 with it in the reduced zoo.)
    const SdpStep& last = post->steps.back();
    if (last.kind != SdpKind::kClip) continue;
    const float bound = std::max(std::fabs(last.lo), std::fabs(last.hi));
    if (2 * (*observed)[t] >= bound) amax[t] = bound;
  }
}

// Each op's precision (INT8 where allowed and ranged, else FP16), shared-range groups and I/O formats.
// `float_io`: float32 linear I/O instead of the requested formats (to run the result in the engine).
// The first of an op's tensors that has no INT8 range (constants have one unless they hold an infinity), or -1.
int64_t first_unscaled(const Op& op, const std::vector<float>& amax) {
  for (uint32_t t : op.inputs)
    if (amax[t] <= 0) return t;
  return amax[op.outputs[0]] > 0 ? -1 : int64_t(op.outputs[0]);
}

// The --layerPrecisions entry that names `layer`, as trtexec reads them: the entry of its exact name, else
// a pattern with one '*' (any text, "*" alone every layer: "*:fp16,conv1:int8"). Where several patterns
// match, the longest (the most specific) decides, so the choice never depends on the order of a map. A
// layer that is one piece of an ONNX node (a Split's "name [k]") is also named by the node's name.
const std::pair<const std::string, std::string>* precision_entry(const std::map<std::string, std::string>& lp,
                                                                   const std::string& layer) {
  std::vector<std::string> names = {layer};
  if (const size_t piece = layer.rfind(" ["); piece != std::string::npos && layer.back() == ']')
    names.push_back(layer.substr(0, piece));
  for (const std::string& name : names)
    if (const auto it = lp.find(name); it != lp.end()) return &*it;
  const std::pair<const std::string, std::string>* best = nullptr;
  for (const auto& entry : lp) {
    const std::string& pattern = entry.first;
    const size_t star = pattern.find('*');
    if (star == std::string::npos) continue;
    const std::string prefix = pattern.substr(0, star), suffix = pattern.substr(star + 1);
    const bool match = std::any_of(names.begin(), names.end(), [&](const std::string& name) {
      return name.size() >= prefix.size() + suffix.size() && name.compare(0, prefix.size(), prefix) == 0 &&
             name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
    });
    if (match && (!best || pattern.size() > best->first.size())) best = &entry;
  }
  return best;
}

PrecisionPlan plan_precisions(const Lowered& low, std::vector<float> amax, const BuildOptions& o, bool float_io) {
  const Model& fp32 = low.model;
  PrecisionPlan plan;
  plan.op_precision.resize(fp32.ops.size());
  const DataType fallback = o.fp16 ? DataType::kFloat16 : DataType::kFloat32;
  std::set<std::string> unused_overrides;
  for (const auto& [name, p] : o.layer_precisions) unused_overrides.insert(name);
  for (size_t i = 0; i < fp32.ops.size(); ++i) {
    const Op& op = fp32.ops[i];
    const std::string base = op.name.substr(0, op.name.find(" ("));
    auto unscaled = [&] { return first_unscaled(op, amax); };
    auto has_scales = [&] { return unscaled() < 0; };
    DataType p = o.fp32_reference && !o.fp16 && !o.int8 ? DataType::kFloat32 : fallback;
    const bool int8_ok = o.int8 && supports_int8(op) && has_scales();
    if (int8_ok) p = DataType::kInt8;
    if (const auto* it = precision_entry(o.layer_precisions, base)) {
      unused_overrides.erase(it->first);
      const DataType want = it->second == "int8" ? DataType::kInt8 : it->second == "fp16" ? DataType::kFloat16 : DataType::kFloat32;
      if (it->second != "int8" && it->second != "fp16") fail("--layerPrecisions: '", it->second, "' for '", base, "' is not fp16 or int8");
      if (want == DataType::kInt8 && !int8_ok) {
        const std::string why = !o.int8 ? "--int8 is not set" : !supports_int8(op) ? "the DLA runs this layer in FP16 only" : "no INT8 scale for its tensors";
        if (o.constraints == PrecisionConstraints::kObey) fail("layer '", base, "' is constrained to int8 but ", why);
        if (o.verbose) o.verbose("layer '" + base + "': int8 requested but " + why + "; using fp16");
      } else {
        if (want == DataType::kFloat16 && !o.fp16 && o.constraints == PrecisionConstraints::kObey)
          fail("layer '", base, "' is constrained to fp16 but --fp16 is not set");
        if (want == DataType::kFloat16 && !o.fp16 && o.verbose)
          o.verbose("layer '" + base + "': fp16 requested but --fp16 is not set; using " + to_string(p));
        if (want == DataType::kInt8 || o.fp16) p = want;
      }
    }
    if (p == DataType::kFloat32 && !o.fp32_reference) {
      fail("layer '", base, "' (", op_kind_name(op.params), ") cannot run in INT8 (",
           !supports_int8(op) ? std::string("the DLA runs it in FP16 only")
           : unscaled() >= 0 && fp32.tensors[size_t(unscaled())].constant >= 0
               ? "its constant '" + fp32.tensors[size_t(unscaled())].name + "' holds an infinity, which has no INT8 "
                     "scale: replace it with a finite value"
           : unscaled() >= 0  ? "no scale for its tensor '" + fp32.tensors[size_t(unscaled())].name +
                                   "': give calibration data or a cache entry for it (a tensor whose calibration "
                                   "values are all 0 has no range either)"
                              : std::string("no scale for its tensors: add them to the calibration data or cache"),
           "); add --fp16 to let it run in FP16");
    }
    plan.op_precision[i] = p;
  }
  if (!unused_overrides.empty()) {
    // Nodes fused into a layer (BatchNormalization, an activation after a convolution) are not layers of
    // their own: list the layers so the user can name the one that holds it.
    std::string layers;
    for (size_t i = 0; i < fp32.ops.size() && i < 12; ++i)
      layers += (i ? ", " : "") + fp32.ops[i].name.substr(0, fp32.ops[i].name.find(" ("));
    if (fp32.ops.size() > 12) layers += ", ... (`softdla build --verbose` lists them all)";
    const std::string& unused = *unused_overrides.begin();
    fail("--layerPrecisions names '", unused, "', which ",
         unused.find('*') == std::string::npos ? "is not a layer of this model" : "matches no layer of this model",
         "; a node fused into a layer (batch normalization, an activation) takes that layer's precision. Layers: ",
         layers);
  }

  // INT8 tensors in one shared-range group take the largest range of the group (as TensorRT does).
  const std::vector<uint32_t> group = shared_range_groups(fp32, plan.op_precision);
  std::map<uint32_t, float> group_max;
  for (uint32_t t = 0; t < fp32.tensors.size(); ++t) group_max[group[t]] = std::max(group_max[group[t]], amax[t]);
  for (uint32_t t = 0; t < fp32.tensors.size(); ++t) {
    if (amax[t] <= 0) continue;
    // A model's own Q/DQ scale that the rule raises: ONNX Runtime would keep it, the DLA cannot.
    if (o.verbose && low.qdq_amax.count(t) && group_max[group[t]] > amax[t])
      o.verbose("tensor '" + fp32.tensors[t].name + "': its Q/DQ scale " + std::to_string(scale_from_amax(amax[t])) +
                " becomes " + std::to_string(scale_from_amax(group_max[group[t]])) +
                ", the largest of the tensors it shares a scale with on the DLA (inputs of an add, subtract, max or "
                "min; a concatenation; a pool, resize or copy)");
    amax[t] = group_max[group[t]];
  }
  plan.amax = amax;

  // ---- I/O formats ----
  auto first_precision = [&](uint32_t tensor, bool input) {
    for (size_t i = 0; i < fp32.ops.size(); ++i) {
      const Op& op = fp32.ops[i];
      if (input ? std::count(op.inputs.begin(), op.inputs.end(), tensor) > 0 : op.outputs[0] == tensor)
        return plan.op_precision[i];
    }
    return fallback;
  };
  auto default_format = [&](DataType p) {
    if (p == DataType::kFloat32) return IoFormat{DataType::kFloat32, TensorFormat::kLinear};
    return IoFormat{p, TensorFormat::kDlaLinear};
  };
  const std::vector<IoChoice> in_choices = io_list(o.input_formats, fp32.inputs.size(), "input");
  const std::vector<IoChoice> out_choices = io_list(o.output_formats, fp32.outputs.size(), "output");
  const bool ref_only = o.fp32_reference && !o.fp16 && !o.int8;
  if (float_io) {  // for measuring candidates in the engine: float32 in and out
    plan.inputs.assign(fp32.inputs.size(), IoFormat{DataType::kFloat32, TensorFormat::kLinear});
    plan.outputs.assign(fp32.outputs.size(), IoFormat{DataType::kFloat32, TensorFormat::kLinear});
    return plan;
  }
  // A tensor's format: the default for its layer's precision, else the first alternative the DLA accepts
  // for it (the first one given, for the FP32 reference).
  auto choose = [&](const IoChoice& given, DataType precision, bool is_input, const std::string& name, uint32_t channels,
                    const std::function<std::string(const IoFormat&)>& also = {}) {
    const IoChoice choice = given.empty() ? IoChoice{default_format(precision)} : given;
    return ref_only ? choice.front() : choose_standalone_format(choice, is_input, name, channels, also);
  };
  plan.inputs.resize(fp32.inputs.size());
  plan.outputs.resize(fp32.outputs.size());
  for (size_t i = 0; i < fp32.inputs.size(); ++i) {
    const uint32_t x = fp32.inputs[i].tensor;
    const DataType consumer = first_precision(x, true);
    // The DLA reads a dla_hwc4 image only into layers of its own precision (dla-facts: "unsupported" the
    // other way round): every layer that reads it, since a conversion layer in between is not what the
    // device runs. An alternative that breaks it is passed over, as trtexec passes over the others.
    auto image_rule = [&](const IoFormat& f) -> std::string {
      if (f.format != TensorFormat::kDlaHwc4) return "";
      for (size_t k = 0; k < fp32.ops.size(); ++k) {
        const Op& op = fp32.ops[k];
        if (!std::count(op.inputs.begin(), op.inputs.end(), x) || plan.op_precision[k] == f.dtype) continue;
        const std::string layer = op.name.substr(0, op.name.find(" ("));
        const std::string runs = to_string(plan.op_precision[k]);
        return "input '" + low.input_names[i] + "': " + to_string(f) + " feeds layer '" + layer + "', which runs in " +
               runs + "; the DLA reads a dla_hwc4 image only into layers of the same precision: give " + runs +
               ":dla_hwc4 (where every layer reading it runs in " + runs + "), or set the layer's precision "
               "(--precisionConstraints=prefer --layerPrecisions=" + layer + ":" + to_string(f.dtype) + ")";
      }
      return "";
    };
    plan.inputs[i] = choose(in_choices[i], consumer, true, low.input_names[i], fp32.tensors[x].shape[1], image_rule);
    if (plan.inputs[i].dtype == DataType::kInt8 && amax[x] <= 0) {
      // Q/DQ pairs of different scales on the input (one quantizer per reader) leave it no scale of its own.
      std::set<float> pair_scales;
      for (const Op& op : fp32.ops)
        if (is_pair_op(op, low) && op.inputs[0] == x) pair_scales.insert(float(scale_from_amax(low.qdq_amax.at(op.outputs[0]))));
      std::string scales;
      for (float sc : pair_scales) {
        char text[32];
        std::snprintf(text, sizeof text, "%.9g", double(sc));
        scales += (scales.empty() ? "" : " and ") + std::string(text);
      }
      if (pair_scales.size() > 1)
        fail("input '", low.input_names[i], "' is int8 but has no one scale: its Q/DQ pairs quantize it at ", scales,
             ", and an int8 input holds one; give its readers one pair (one scale), or an fp16 input format");
      fail("input '", low.input_names[i], "' is int8 but has no scale: calibrate, or give a cache entry for it (a "
           "tensor whose calibration values are all 0 has no range either)");
    }
  }
  for (size_t i = 0; i < fp32.outputs.size(); ++i) {
    plan.outputs[i] = choose(out_choices[i], first_precision(fp32.outputs[i].tensor, false), false, low.output_names[i],
                             fp32.tensors[fp32.outputs[i].tensor].shape[1]);
    if (plan.outputs[i].dtype == DataType::kInt8 && amax[fp32.outputs[i].tensor] <= 0)
      fail("output '", low.output_names[i], "' is int8 but has no scale: calibrate, or give a cache entry for it (a "
           "tensor whose calibration values are all 0 has no range either)");
  }

  return plan;
}

// Calibrated ranges fill every tensor a Q/DQ pair did not range already.
std::vector<float> with_calibrated(const Lowered& low, std::vector<float> amax, const std::vector<float>& found) {
  for (uint32_t t = 0; t < amax.size(); ++t)
    if (found[t] > 0 && !low.qdq_amax.count(t)) amax[t] = found[t];
  return amax;
}

const char* rule_name(Calibrator c) {
  switch (c) {
    case Calibrator::kEntropy: return "entropy";
    case Calibrator::kMinMax: return "minmax";
    case Calibrator::kPercentile: return "percentile";
    case Calibrator::kMse: return "mse";
    case Calibrator::kAuto: return "auto";
  }
  return "";
}

// The calibrator named in a written cache's header, as TensorRT names its calibrators where one matches.
std::string cache_header_name(Calibrator c) {
  if (c == Calibrator::kEntropy) return "EntropyCalibration2";
  if (c == Calibrator::kMinMax) return "MinMaxCalibration";
  return std::string("softdla-") + rule_name(c);
}

double cosine(std::span<const float> a, std::span<const float> b) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) ab += double(a[i]) * b[i], aa += double(a[i]) * a[i], bb += double(b[i]) * b[i];
  return aa > 0 && bb > 0 ? ab / std::sqrt(aa * bb) : (aa == bb ? 1.0 : 0.0);
}

// --calibrator=auto (the default): every range rule comes from the same histograms; the INT8 model each
// gives is run on calibration batches and the rule whose outputs agree best with the FP32 reference
// (the worst output's mean cosine) is kept. Which rule suits a network depends on how much of its signal lives in the tails
// of its activations (entropy clips them hardest, min-max not at all), and the calibration data is there
// to measure it. The judging is cross-validated: the batches are dealt into kCalibrationFolds folds, and
// each fold's batches judge the ranges fitted on all the others (one FP32 pass gives every fold's
// histograms). Scored on the batches that fitted them, tight ranges look best (they clip nothing those
// batches hold), and the rule chosen clipped the stem of MnasNet on new images. With two folds each fit
// saw half the samples, tighter than the final fit on all of them, and MnasNet at 64 px lost MSE to
// percentile on 16 samples (0.952 on new images where MSE gives 0.973); four folds fit on three quarters.
constexpr double kRuleMargin = 0.002;  // the worst output's mean cosine
constexpr size_t kRuleBatches = 16;     // calibration batches the candidates run (over all folds)

struct RangeRule {
  Calibrator rule;
  bool tail = false;  // the percentile rule at kTailPercentile instead of --percentile
};

const std::vector<float>& ranges_of(const RuleRanges& r, RangeRule c) {
  const std::vector<float>& v = c.tail ? r.percentile_tail : r.of(c.rule);
  if (v.empty()) fail("internal: no ranges were calibrated for ", rule_name(c.rule), c.tail ? " (tail)" : "");
  return v;
}

std::string rule_label(RangeRule c, double percentile) {
  if (c.rule != Calibrator::kPercentile) return rule_name(c.rule);
  std::ostringstream s;
  s << "percentile " << (c.tail ? kTailPercentile : percentile);
  return s.str();
}

// Per output, the mean cosine of the INT8 model that `rule`'s ranges in `fitted` give, over batches[i]
// for i in `judged`, against their FP32 outputs expected[i].
std::vector<double> rule_score(const Lowered& low, const std::vector<float>& base, const RuleRanges& fitted, RangeRule rule,
                  const std::vector<Batch>& batches, const std::vector<BatchOutputs>& expected,
                  const std::vector<size_t>& judged, const BuildOptions& o) {
  std::vector<float> amax = with_calibrated(low, base, ranges_of(fitted, rule));
  complete_ranges(low, amax, &fitted.minmax);
  Model m = apply_precision(low, plan_precisions(low, amax, o, true));
  finalize_model(m);
  const Engine candidate(std::move(m));
  // Each sample's cosine, not a batch's: the score does not change with the model's batch size.
  const size_t n = std::max<size_t>(1, low.model.tensors[low.model.inputs[0].tensor].shape[0]);
  std::vector<double> per_output;
  BatchOutputs got;
  for (size_t b : judged) {
    run_float(candidate, batches[b], got);
    per_output.resize(got.size(), 0.0);
    for (size_t i = 0; i < got.size(); ++i) {
      const size_t per = got[i].size() / n;
      for (size_t s = 0; s < n; ++s) {
        const std::span<const float> a(got[i].data() + s * per, per), e(expected[b][i].data() + s * per, per);
        per_output[i] += cosine(a, e) / double(judged.size() * n);
      }
    }
  }
  return per_output;
}

// The worst output's score; a NaN (an output that is NaN) counts as the worst there is.
double worst_output(const std::vector<double>& per_output) {
  double worst = per_output.empty() ? 0.0 : 1.0;
  for (double c : per_output) worst = std::isnan(c) ? -1.0 : std::min(worst, c);
  return worst;
}

// `all` comes from calibrate_all(kAuto) with kRuleBatches reference batches: with two or more batches
// it holds, per fold, the ranges fitted on the other folds' batches, judged here on that fold's own.
RangeRule choose_rule(const Lowered& low, const std::vector<float>& base, CalibratedRanges& all,
                      const std::vector<Batch>& batches, const BuildOptions& o, double& best_score) {
  const RangeRule rules[] = {{Calibrator::kEntropy}, {Calibrator::kPercentile}, {Calibrator::kPercentile, true},
                             {Calibrator::kMse}, {Calibrator::kMinMax}};
  const size_t references = all.reference_outputs.size();
  // Each output's mean cosine over the held-out samples of every fold; the worst output's is the rule's
  // score: a network's heads (a detector's levels, auxiliary outputs) are each used, and a mean over
  // them let one head lose to the others.
  std::vector<double> score(std::size(rules), 0.0);
  for (size_t r = 0; r < std::size(rules); ++r) {
    std::vector<double> per_output;
    if (all.folds.empty()) {  // one batch: nothing to hold out
      per_output = rule_score(low, base, all, rules[r], batches, all.reference_outputs, {0}, o);
    } else {
      for (size_t k = 0; k < all.folds.size(); ++k) {
        std::vector<size_t> held_out;
        for (size_t b = 0; b < references; ++b)
          if (b % all.folds.size() == k) held_out.push_back(b);
        const std::vector<double> fold = rule_score(low, base, all.folds[k], rules[r], batches, all.reference_outputs, held_out, o);
        per_output.resize(fold.size(), 0.0);
        for (size_t i = 0; i < fold.size(); ++i) per_output[i] += fold[i] / double(all.folds.size());
      }
    }
    score[r] = worst_output(per_output);
    if (o.progress) o.progress("choosing the calibration rule", r + 1, std::size(rules));
  }
  size_t best = 0;
  for (size_t r = 0; r < std::size(rules); ++r) {
    if (o.verbose) o.verbose("calibration rule " + rule_label(rules[r], o.percentile) + ": worst output's mean cosine " + std::to_string(score[r]));
    // Entropy is TensorRT's rule: another one replaces it only when clearly better, not by sampling noise.
    if (r > 0 && score[r] > score[best] + (best == 0 ? kRuleMargin : 0.0)) best = r;
  }
  if (o.verbose) o.verbose("calibration rule chosen: " + rule_label(rules[best], o.percentile));
  best_score = score[best];
  return rules[best];
}

// What calibration measured that makes the INT8 build unusable, said before the user finds it in the
// outputs: a graph input whose range stray values set (its ordinary values round to 0; inputs keep their
// whole range, so the calibrator cannot clip it), and, under auto, held-out outputs far from FP32's.
constexpr double kFlushedWarning = 0.5;  // share of an input's non-zero values rounded to 0
constexpr double kPoorCosine = 0.9;      // the chosen rule's worst output (mean cosine) on held-out samples

std::vector<std::string> calibration_quality_warnings(const Lowered& low, const std::vector<double>& flushed,
                                                      double score, const std::string& rule) {
  std::vector<std::string> w;
  for (size_t i = 0; i < flushed.size() && i < low.input_names.size(); ++i)
    if (flushed[i] > kFlushedWarning) {
      std::ostringstream s;
      s << "calibration data: input '" << low.input_names[i] << "' keeps its whole observed range (graph inputs are "
        << "not clipped), and at that INT8 scale " << std::lround(flushed[i] * 100) << " % of its non-zero values "
        << "round to 0: a few values far larger than the rest set the range. If they are strays, remove them from "
        << "the calibration data; if the input mixes quantities of different sizes (channels in other units), "
        << "scale them to one range before the network, or give the input fp16 I/O and its first layer FP16";
      w.push_back(s.str());
    }
  if (!(score >= kPoorCosine)) {
    std::ostringstream s;
    s << "INT8 calibration: the best range rule (" << rule << ") gives an output whose mean cosine to the FP32 "
      << "model on held-out calibration samples is " << score << "; INT8 will be inaccurate on this model. Check the "
      << "calibration data (representative inputs, preprocessed as at inference), run `softdla compare` to find the "
      << "layers that lose it, or build --fp16 only";
    w.push_back(s.str());
  }
  return w;
}

}  // namespace

std::vector<CheckRow> check(const std::vector<uint8_t>& onnx, Target target,
                            const std::map<std::string, std::vector<int64_t>>& shapes) {
  std::vector<NodeIssue> issues;
  Graph g = prepare_graph(onnx, shapes, &issues);
  std::vector<NodeIssue> lowering_issues;
  const Lowered low = lower(g, target, &lowering_issues);
  issues.insert(issues.end(), lowering_issues.begin(), lowering_issues.end());
  std::vector<CheckRow> rows;
  // What the build refuses of the graph as a whole (its I/O names), as one more row.
  try {
    check_io_names(low.input_names, low.output_names);
  } catch (const Error& e) {
    rows.push_back({"(graph)", "inputs/outputs", false, e.what()});
  }
  // The DLA's range of each dimension, which the loadable's checks apply to every tensor.
  for (size_t t = 0; t < low.model.tensors.size(); ++t) {
    try {
      check_tensor_extents(low.model, t);
    } catch (const Error& e) {
      rows.push_back({"(graph)", "tensor sizes", false, e.what()});
    }
  }
  for (const Node& n : g.nodes) {
    CheckRow r{n.name, n.op, true, n.removed ? "folded at build time" : ""};
    // A node's first problem is its row's: a later one may only follow from it (a DequantizeLinear left
    // alone once its QuantizeLinear's pair was refused because of it).
    for (const NodeIssue& i : issues)
      if (i.node == n.name && r.supported) {
        r.supported = false;
        r.reason = i.message;
        const std::string prefix = "node '" + n.label() + "' (" + n.op + "): ";
        if (r.reason.rfind(prefix, 0) == 0) r.reason = r.reason.substr(prefix.size());
      }
    rows.push_back(r);
  }
  return rows;
}

// The ranges a calibration cache gives, into amax: a tensor takes the entry of any of its ONNX names
// (entries that disagree for one tensor are an error), and a tensor with a Q/DQ pair keeps the model's
// own scale (Q/DQ first, as docs/BUILDER.md says). A scale of 0 (a tensor that was all zeros) leaves the
// tensor without a range, as a missing entry does.
static void apply_calibration_cache(const std::string& path, const std::map<std::string, float>& cache,
                                    const std::vector<std::vector<std::string>>& onnx_names, const Lowered& low,
                                    std::vector<float>& amax) {
  size_t matched = 0;
  for (uint32_t t = 0; t < onnx_names.size(); ++t) {
    const std::string* first = nullptr;
    float scale = 0;
    for (const std::string& name : onnx_names[t]) {
      const auto it = cache.find(name);
      if (it == cache.end()) continue;
      ++matched;
      if (first && it->second != scale)
        fail("calibration cache '", path, "' gives '", *first, "' the scale ", scale, " and '", name, "' the scale ",
             it->second, ", but they are one tensor on the DLA (the ops between them only rename it); give them one scale");
      first = &name, scale = it->second;
    }
    if (!first || low.qdq_amax.count(t)) continue;
    const double a = amax_from_scale(scale);
    if (!(a <= std::numeric_limits<float>::max()))
      fail("calibration cache '", path, "': the scale of '", *first, "' (", scale, ") makes a range beyond float32");
    amax[t] = float(a);
  }
  if (cache.empty())
    fail("calibration cache '", path, "' has no entries (a header line alone, or lines not ending in '\\n'): delete it "
         "and calibrate again with --calib-data, or give a cache with one '<tensor>: <hex scale>' line a tensor");
  if (matched == 0)
    fail("calibration cache '", path, "' names none of this model's tensors (its first entry is '", cache.begin()->first,
         "'): was it written for another model, or for names an exporter has since changed?");
}

// The calibrated scales of the ONNX values this build's fusions hide (a convolution's output before its
// BatchNormalization and activation, a BatchNormalization's before its ReLU), into `scales`: TensorRT's
// caches list every activation tensor of the network, and TensorRT reads a cache written here. The model is
// lowered again without fusions and calibrated with the rule this build chose; the names the built model
// has keep their own scales. A model that does not lower unfused keeps the cache it has.
void add_unfused_scales(const std::vector<uint8_t>& onnx, const BuildOptions& o, const std::vector<Batch>& batches,
                        RangeRule rule, std::map<std::string, float>& scales) {
  try {
    Graph g = prepare_graph(onnx, o.shapes, nullptr);
    const Lowered low = lower(g, o.target, nullptr, false);
    const bool missing = std::any_of(low.tensor_of.begin(), low.tensor_of.end(), [&](const auto& nt) {
      return !scales.count(nt.first) && low.model.tensors[nt.second].constant < 0;
    });
    if (missing) {
      // The rule calibrated as itself (not under kAuto): the tail percentile, where auto chose it, is the
      // percentile of this pass, so its ranges are the plain percentile's (percentile_tail, which only
      // kAuto fills, is empty here: reading it was a crash).
      const double percentile = rule.tail ? kTailPercentile : o.percentile;
      const CalibratedRanges r = calibrate_all(low.model, batches, rule.rule, percentile, 0, o.progress);
      const std::vector<float>& amax = r.of(rule.rule);
      if (amax.size() != low.model.tensors.size()) fail("internal: the unfused pass has no ranges for ", rule_name(rule.rule));
      for (const auto& [name, t] : low.tensor_of)
        if (!scales.count(name) && low.model.tensors[t].constant < 0 && amax[t] > 0)
          scales[name] = float(scale_from_amax(amax[t]));
    }
    // Values that only rearrange another one and never become a tensor of their own (a Flatten a Gemm
    // absorbs, a channel shuffle's rank-5 views): the same values, so the same range.
    static const std::set<std::string> kRearranging = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose",
                                                       "Identity", "Dropout"};
    for (const Node& n : g.nodes)
      if (kRearranging.count(n.op) && !n.inputs.empty() && !n.outputs.empty() && !scales.count(n.outputs[0]))
        if (const auto it = scales.find(n.inputs[0]); it != scales.end()) scales[n.outputs[0]] = it->second;
  } catch (const Error& e) {  // the build itself succeeded: its cache keeps its own tensors
    if (o.verbose) o.verbose(std::string("calibration cache: the tensors fusions hide are left out (") + e.what() + ")");
  }
}

// What the build did that the flags may not suggest: layers left in FP16 for want of an INT8 scale (a
// cache written for another model, a tensor all zeros in the calibration data), per-layer precisions that
// did not apply, calibration data without --int8.
std::vector<std::string> precision_warnings(const Lowered& low, const PrecisionPlan& plan, const BuildOptions& o,
                                            bool have_cache) {
  const Model& fp32 = low.model;
  std::vector<std::string> w;
  auto base_of = [](const Op& op) { return op.name.substr(0, op.name.find(" (")); };
  // The first of an op's tensors without an INT8 range, described ("tensor 'x'", or a constant's why).
  auto unscaled_tensor = [&](const Op& op) -> std::string {
    const int64_t t = first_unscaled(op, plan.amax);
    if (t < 0) return "";
    const Tensor& x = fp32.tensors[size_t(t)];
    return x.constant >= 0 ? "constant '" + x.name + "', which holds an infinity" : "tensor '" + x.name + "'";
  };
  if (o.int8) {
    size_t unscaled = 0, candidates = 0;
    std::string first_layer, first_tensor;
    for (size_t i = 0; i < fp32.ops.size(); ++i) {
      const Op& op = fp32.ops[i];
      // A pair's own op converts where its input is FP16: nothing a scale would change.
      if (is_pair_op(op, low)) continue;
      if (!supports_int8(op) || precision_entry(o.layer_precisions, base_of(op))) continue;
      ++candidates;
      const std::string t = unscaled_tensor(op);
      if (plan.op_precision[i] == DataType::kInt8 || t.empty()) continue;
      if (!unscaled++) first_layer = base_of(op), first_tensor = t;
    }
    if (unscaled)
      w.push_back(std::to_string(unscaled) + " of " + std::to_string(candidates) +
                  " layers that could run in INT8 run in FP16: no INT8 scale for their tensors (the first: layer '" +
                  first_layer + "', " + first_tensor + ")" +
                  (have_cache ? "; the calibration cache has no entry for them, or an entry of 0 (a tensor that was all zeros when it was "
                                 "calibrated): was it written for this model?"
                   : !low.qdq_amax.empty()
                       // An explicitly quantized model names its scales with Q/DQ pairs; pairs on a layer's
                       // inputs alone (ModelOpt's default) leave its output without one.
                       ? "; in a Q/DQ model a layer runs in INT8 where its inputs and its output have pairs: add a "
                         "Q/DQ pair on the output too (or give calibration data for the tensors without one)"
                       : "; give calibration data or cache entries for them (a tensor all 0 in the "
                         "calibration data has no range)"));
  }
  // One warning an entry: its first layer that runs otherwise, and how many do (a pattern may name many).
  std::map<std::string, std::pair<size_t, std::string>> unmet;  // entry -> (layers, the first one's warning)
  for (size_t i = 0; i < fp32.ops.size(); ++i) {
    const Op& op = fp32.ops[i];
    const auto* entry = precision_entry(o.layer_precisions, base_of(op));
    if (!entry || to_string(plan.op_precision[i]) == entry->second) continue;
    const std::string& want = entry->second;
    auto& [count, text] = unmet[entry->first];
    if (count++ > 0) continue;
    const std::string why = want == "int8" && !o.int8   ? "--int8 is not set"
                            : want == "fp16" && !o.fp16 ? "--fp16 is not set"
                            : want == "int8" && !supports_int8(op)
                                ? "the DLA runs it in FP16 only"
                                : "no INT8 scale for its " + unscaled_tensor(op);
    text = "--layerPrecisions asks " + want + " for layer '" + base_of(op) + "'" +
           (entry->first == base_of(op) ? "" : " (by '" + entry->first + "')") + ", which runs in " +
           to_string(plan.op_precision[i]) + ": " + why;
  }
  for (const auto& [entry, unmet_layers] : unmet)
    w.push_back(unmet_layers.second +
                (unmet_layers.first > 1 ? "; " + std::to_string(unmet_layers.first - 1) + " more layer(s) of '" + entry +
                                              "' run otherwise too (--verbose lists them)"
                                        : std::string()) +
                " (--precisionConstraints=obey makes this an error)");
  if (!o.calib_data.empty() && !o.int8) w.push_back("--calib-data is not used without --int8");
  return w;
}

constexpr uint64_t kDlaLocalDramBytes = uint64_t(1) << 30;

BuildResult build(const std::vector<uint8_t>& onnx, const BuildOptions& given) {
  if (!given.fp16 && !given.int8 && !given.fp32_reference)
    fail("choose a precision: --fp16, --int8, or both (the DLA runs FP16 and INT8 only)");
  // trtexec sets per-layer precisions only under --precisionConstraints=prefer or obey; with none it warns
  // that they have no effect, and the engine on the device has the default precisions. The same here, so
  // that what softdla runs is what the device would.
  const bool precisions_ignored = given.constraints == PrecisionConstraints::kNone && !given.layer_precisions.empty();
  BuildOptions effective = given;
  if (precisions_ignored) effective.layer_precisions.clear();
  const BuildOptions& o = effective;
  Graph g = prepare_graph(onnx, o.shapes, nullptr);
  Lowered low = lower(g, o.target, nullptr);
  Model& fp32 = low.model;
  fp32.build_info.source_model_sha256 = sha256_hex(onnx);
  if (o.progress) o.progress("import and lowering", 1, 1);

  // ---- ranges for INT8 ----
  std::vector<float> amax(fp32.tensors.size(), 0.f);
  // Every ONNX name of each tensor: Identity, Dropout, Reshape-like ops and Q/DQ pairs give one tensor
  // several names, and a calibration cache may name any of them.
  std::vector<std::vector<std::string>> onnx_names(fp32.tensors.size());
  for (const auto& [name, t] : low.tensor_of) onnx_names[t].push_back(name);
  for (uint32_t t = 0; t < fp32.tensors.size(); ++t)
    if (onnx_names[t].empty()) onnx_names[t].push_back(fp32.tensors[t].name);
  bool have_cache = false, calibrated = false;
  RangeRule chosen_rule{Calibrator::kEntropy};
  std::vector<float> observed;  // the calibration data's largest |x| per tensor, where softdla calibrates
  std::vector<Batch> batches;    // the calibration data, where softdla calibrates
  std::vector<double> input_flushed;  // CalibratedRanges::input_flushed, where softdla calibrates
  double calibration_score = 1.0;     // auto's score of the rule it chose
  if (o.int8) {
    for (const auto& [t, a] : low.qdq_amax) amax[t] = a;
    if (!o.calib_cache.empty() && !std::filesystem::exists(o.calib_cache) && o.calib_data.empty())
      fail("calibration cache '", o.calib_cache, "' does not exist, and there is no calibration data to calibrate "
           "and write it: give --calib-data DIR (or the path of an existing cache)");
    if (!o.calib_cache.empty() && std::filesystem::exists(o.calib_cache)) {
      apply_calibration_cache(o.calib_cache, read_calibration_cache(o.calib_cache), onnx_names, low, amax);
      have_cache = true;
    }
    if (!o.calib_data.empty() && !have_cache) {
      batches = load_calibration_data(o.calib_data, fp32, low.input_names);
      const Calibrator rule = parse_calibrator(o.calibrator);
      const size_t references = rule == Calibrator::kAuto ? kRuleBatches : 0;  // what choose_rule judges on
      CalibratedRanges ranges = calibrate_all(fp32, batches, rule, o.percentile, references, o.progress);
      chosen_rule = rule == Calibrator::kAuto ? choose_rule(low, amax, ranges, batches, o, calibration_score) : RangeRule{rule};
      input_flushed = ranges.input_flushed;
      amax = with_calibrated(low, amax, ranges_of(ranges, chosen_rule));
      observed = std::move(ranges.minmax);
      calibrated = true;
    } else if (!have_cache && low.qdq_amax.empty() && !o.fp16) {
      fail("--int8 needs scales: give calibration data (--calib-data DIR), a calibration cache (--calib FILE), "
           "or a model with Q/DQ nodes; or add --fp16");
    }
    complete_ranges(low, amax, observed.empty() ? nullptr : &observed);
  }

  PrecisionPlan plan = plan_precisions(low, amax, o, false);
  amax = plan.amax;
  const bool ref_only = o.fp32_reference && !o.fp16 && !o.int8;
  BuildResult r;
  r.warnings = precision_warnings(low, plan, o, have_cache);
  if (precisions_ignored)
    r.warnings.insert(r.warnings.begin(),
                      "--layerPrecisions has no effect with --precisionConstraints=none, as in trtexec (TensorRT sets "
                      "per-layer precisions only under prefer or obey): add --precisionConstraints=prefer (a layer "
                      "falls back where its precision is impossible) or obey (the build fails there)");
  if (calibrated) {
    // Only inputs given an INT8 scale lose values to it: as INT8 I/O, or read by an INT8 layer.
    std::vector<double> flushed = input_flushed;
    for (size_t i = 0; i < flushed.size(); ++i) {
      const uint32_t t = fp32.inputs[i].tensor;
      bool quantized = plan.inputs[i].dtype == DataType::kInt8;
      for (size_t k = 0; k < fp32.ops.size() && !quantized; ++k)
        quantized = plan.op_precision[k] == DataType::kInt8 &&
                    std::count(fp32.ops[k].inputs.begin(), fp32.ops[k].inputs.end(), t) > 0;
      if (!quantized) flushed[i] = 0;
    }
    const std::vector<std::string> w =
        calibration_quality_warnings(low, flushed, calibration_score, rule_label(chosen_rule, o.percentile));
    r.warnings.insert(r.warnings.end(), w.begin(), w.end());
  }
  if (have_cache && !o.calib_data.empty())  // trtexec's rule too, but a stale cache is easy to miss
    r.warnings.push_back("calibration cache '" + o.calib_cache + "' exists: its scales are used and --calib-data is not "
                         "read; delete the cache (or give another --calib path) to calibrate on the data again");

  if (o.expose_intermediates) expose_intermediates(low, plan);
  Model m = apply_precision(low, plan);
  std::string precisions;
  if (o.int8) precisions += "int8";
  if (o.fp16) precisions += precisions.empty() ? "fp16" : "+fp16";
  if (ref_only) precisions = "fp32 (reference, not a DLA precision)";
  m.build_info = fp32.build_info;
  m.build_info.builder = std::string("softdla ") + kSoftdlaVersion;
  m.build_info.precisions = precisions;
  m.build_info.flags = o.flags_text;

  for (size_t i = 0; i < fp32.ops.size(); ++i)
    r.layers.push_back({fp32.ops[i].name, op_kind_name(fp32.ops[i].params), to_string(plan.op_precision[i]),
                        fp32.tensors[fp32.ops[i].outputs[0]].name});
  for (uint32_t t = 0; t < fp32.tensors.size(); ++t)
    if (amax[t] > 0 && fp32.tensors[t].constant < 0)
      for (const std::string& name : onnx_names[t]) r.scales[name] = float(scale_from_amax(amax[t]));
  // The DLA holds the tensors between its layers in one pool, TensorRT's kDLA_LOCAL_DRAM (1 GiB by
  // default): the memory plan lays them out with reuse, and its arena is what the pool must hold. (An
  // FP32 reference is softdla's own, not a DLA build.) Checked before a calibration cache is written.
  finalize_model(m);
  if (!ref_only && m.memory_plan.arena_size > kDlaLocalDramBytes)
    fail("the tensors between layers need a ", m.memory_plan.arena_size, "-byte arena (the memory plan, which reuses "
         "the bytes of tensors no longer read); the DLA keeps them in its local DRAM pool, 1 GiB by default "
         "(TensorRT's kDLA_LOCAL_DRAM): build a smaller batch or resolution, or split the network");
  // Only ranges this build calibrated go into a new cache: without --int8 or calibration data there are
  // none, and a header-only file would stand in for a calibration on the next build.
  if (!o.write_calib_cache.empty() && calibrated) {
    std::map<std::string, float> cache = r.scales;
    add_unfused_scales(onnx, o, batches, chosen_rule, cache);
    write_calibration_cache(o.write_calib_cache, cache, cache_header_name(chosen_rule.rule));
  }
  r.loadable = write_loadable(std::move(m));
  if (o.progress) o.progress("write loadable", 1, 1);
  return r;
}

}  // namespace softdla::builder
