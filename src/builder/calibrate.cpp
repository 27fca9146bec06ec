#include "calibrate.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "engine.h"
#include "error.h"
#include "file_bytes.h"
#include "histogram.h"
#include "loadable.h"
#include "npy.h"

namespace softdla::builder {
namespace {
constexpr size_t kBins = 2048, kQuantBins = 128;
constexpr double kMinHistogramValues = 8.0 * kBins;  // fewer: the tensor keeps its observed maximum
}

Calibrator parse_calibrator(const std::string& name) {
  if (name == "entropy") return Calibrator::kEntropy;
  if (name == "minmax") return Calibrator::kMinMax;
  if (name == "percentile") return Calibrator::kPercentile;
  if (name == "mse") return Calibrator::kMse;
  if (name == "auto") return Calibrator::kAuto;
  fail("unknown calibrator '", name, "' (auto, entropy, minmax, percentile or mse)");
}

// How many samples of one input an array holds: its shape is N samples of the input's C x H x W (axes of
// 1 aside, so [N, 1024] feeds an input of [N, 1024] seen as 1024 x 1 x 1), or one sample. Anything else (NHWC
// images, another channel count) would be read as scrambled samples: an error that shows the shape wanted.
static size_t sample_count(const std::string& file, const std::string& input, const std::vector<uint64_t>& shape,
                           const std::vector<uint64_t>& chw) {
  const auto squeezed = [](auto first, auto last) {
    std::vector<uint64_t> r;
    for (; first != last; ++first)
      if (*first != 1) r.push_back(*first);
    return r;
  };
  const std::vector<uint64_t> want = squeezed(chw.begin(), chw.end());
  if (!shape.empty() && shape[0] > 0 && squeezed(shape.begin() + 1, shape.end()) == want) return size_t(shape[0]);
  if (squeezed(shape.begin(), shape.end()) == want) return 1;
  std::string got;
  for (uint64_t d : shape) got += (got.empty() ? "" : ", ") + std::to_string(d);
  fail("'", file, "': an array of shape (", got, ") for input '", input, "', which takes samples of ", chw[0], " x ",
       chw[1], " x ", chw[2], " (C x H x W): stack the samples on the first axis, as (N, ", chw[0], ", ", chw[1], ", ",
       chw[2], ") in NCHW order");
}

std::vector<Batch> load_calibration_data(const std::string& dir, const Model& m, const std::vector<std::string>& names) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) fail("calibration data '", dir, "' is not a directory of .npy/.npz files");
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string ext = e.path().extension().string();
    if (ext == ".npy" || ext == ".npz") files.push_back(e.path().string());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) fail("no .npy or .npz files in '", dir, "'");
  // Samples per input: a flat queue of single-sample vectors.
  std::vector<std::vector<std::vector<float>>> samples(m.inputs.size());
  std::string all_inputs;
  for (const std::string& n : names) all_inputs += (all_inputs.empty() ? "'" : ", '") + n + "'";
  for (const std::string& f : files) {
    std::vector<std::pair<std::string, NpyArray>> arrays;
    const bool npz = f.size() > 4 && f.substr(f.size() - 4) == ".npz";
    if (npz) arrays = read_npz(f);
    else if (names.size() == 1) arrays.emplace_back(names[0], read_npy(f));
    else
      fail("'", f, "': a .npy file holds one array, and this model has ", names.size(), " inputs (", all_inputs,
           "): give .npz files with one array per input, named after it");
    for (auto& [name, a] : arrays) {
      const auto it = std::find(names.begin(), names.end(), name);
      if (it == names.end())
        fail("'", f, "': array '", name, "' does not name a model input (inputs: ", all_inputs,
             "); in .npz files name each array after its input");
      const size_t idx = size_t(it - names.begin());
      const Shape& s = m.tensors[m.inputs[idx].tensor].shape;
      const size_t per = size_t(s[1]) * s[2] * s[3];
      const size_t count = sample_count(f, name, a.shape, {s[1], s[2], s[3]});
      for (size_t k = 0; k < count; ++k) {
        std::vector<float> v(per);
        for (size_t j = 0; j < per; ++j) {
          v[j] = npy_value(a, k * per + j);
          // A NaN or an infinity has no place on an INT8 grid, and every range rule would skip or be
          // swamped by it: the data is broken, say so.
          if (!std::isfinite(v[j]))
            fail("'", f, "': sample ", k, " of '", name, "' holds ", v[j], " (value ", j,
                 "); calibration data must be finite");
        }
        samples[idx].push_back(std::move(v));
      }
    }
  }
  const size_t n = m.tensors[m.inputs[0].tensor].shape[0];
  // An input no layer reads (an exporter's leftover) needs no samples: zeros stand in for them.
  std::vector<bool> read(m.tensors.size(), false);
  for (const Op& op : m.ops)
    for (uint32_t t : op.inputs) read[t] = true;
  for (const IoBinding& io : m.outputs) read[io.tensor] = true;
  size_t ref = 0;
  while (ref + 1 < samples.size() && samples[ref].empty()) ++ref;
  for (size_t i = 0; i < samples.size(); ++i)
    if (samples[i].empty() && !read[m.inputs[i].tensor]) {
      const Shape& s = m.tensors[m.inputs[i].tensor].shape;
      samples[i].assign(samples[ref].size(), std::vector<float>(size_t(s[1]) * s[2] * s[3], 0.f));
    }
  for (size_t i = 0; i < samples.size(); ++i)
    if (samples[i].size() != samples[ref].size())
      fail("calibration data holds ", samples[ref].size(), " samples of '", names[ref], "' but ", samples[i].size(), " of '",
           names[i], "': every input needs one sample per calibration sample");
  const size_t total = samples[ref].size();
  if (total < n) fail("calibration data holds ", total, " samples of '", names[ref], "'; the model's batch is ", n);
  // The samples of each batch: dealt so that sample s belongs to fold s % folds whatever the batch size
  // (auto's folds take batch b as fold b % folds): the same calibration data then judge the rules on the
  // same samples at batch 1, 2 or 4, and choose the same one. In file order where the counts do not
  // allow it (fewer samples in a fold than its batches need).
  const size_t whole = total / n, folds = whole >= 2 ? std::min(kCalibrationFolds, whole) : 1;
  std::vector<size_t> order(whole * n);
  std::iota(order.begin(), order.end(), size_t(0));
  bool dealt = folds > 1;
  for (size_t b = 0; b < whole && dealt; ++b)
    for (size_t t = 0; t < n && dealt; ++t) {
      const size_t fold = b % folds, index = (b / folds) * n + t, s = fold + index * folds;
      dealt = s < total;
      if (dealt) order[b * n + t] = s;
    }
  if (!dealt) std::iota(order.begin(), order.end(), size_t(0));
  std::vector<Batch> batches;
  for (size_t b = 0; b < whole; ++b) {
    Batch batch(samples.size());
    for (size_t i = 0; i < samples.size(); ++i)
      for (size_t k = 0; k < n; ++k) {
        const std::vector<float>& sample = samples[i][order[b * n + k]];
        batch[i].insert(batch[i].end(), sample.begin(), sample.end());
      }
    batches.push_back(std::move(batch));
  }
  return batches;
}

double entropy_threshold(const std::vector<double>& observed, double max) {
  const size_t nb = observed.size();
  if (nb < kQuantBins) return max;
  const double width = max / double(nb);
  // Bin 0 holds every exact zero: after a ReLU that is often half of all values. Left in, that spike
  // dominates the divergence and every threshold that keeps it sharp wins, cutting ReLU ranges to a
  // fraction of their maximum. NVIDIA's calibrators flatten it to its neighbour's height first; so do we.
  std::vector<double> hist = observed;
  hist[0] = hist[1];
  // For a candidate of i bins, the reference P is the first i bins with everything beyond folded into
  // bin i-1, and the candidate Q spreads each of the 128 levels' mass evenly over its non-empty bins.
  // Then sum(P) is the whole histogram and sum(Q) the first i bins, and
  //   KL(P||Q) = 1/|P| * [sum_k p_k log p_k - sum_k p_k log q_k] + log(|Q| / |P|)
  // where q_k is one value per level: prefix sums give each level's mass and count in O(1), so a
  // candidate costs 128 logarithms instead of i.
  std::vector<double> mass(nb + 1, 0.0), plogp(nb + 1, 0.0), nonzero(nb + 1, 0.0);
  for (size_t k = 0; k < nb; ++k) {
    mass[k + 1] = mass[k] + hist[k];
    plogp[k + 1] = plogp[k] + (hist[k] > 0 ? hist[k] * std::log(hist[k]) : 0.0);
    nonzero[k + 1] = nonzero[k] + (hist[k] != 0 ? 1.0 : 0.0);
  }
  const double total = mass[nb];
  double best_kl = INFINITY;
  size_t best = nb;
  for (size_t i = kQuantBins; i <= nb; ++i) {
    const double outliers = total - mass[i], last = hist[i - 1] + outliers, in_range = mass[i];
    if (total <= 0 || in_range <= 0) continue;
    // Mass the candidate cannot represent at all (outliers folded into an empty bin): infinite
    // divergence, so that threshold is never chosen.
    if (hist[i - 1] == 0 && outliers > 0) continue;
    double sum_plogp = plogp[i - 1] + (last > 0 ? last * std::log(last) : 0.0), sum_plogq = 0;
    const double merged = double(i) / double(kQuantBins);
    for (size_t j = 0; j < kQuantBins; ++j) {
      const size_t start = size_t(double(j) * merged), end = j + 1 == kQuantBins ? i : size_t(double(j + 1) * merged);
      const double level = mass[end] - mass[start], count = nonzero[end] - nonzero[start];
      if (count == 0) continue;
      // p over this level's non-empty bins: their mass, plus the outliers where the level holds bin i-1.
      const double p = end == i ? level + outliers : level;
      sum_plogq += p * std::log(level / count);
    }
    const double kl = (sum_plogp - sum_plogq) / total + std::log(in_range / total);
    if (kl <= best_kl) best_kl = kl, best = i;  // ties keep the wider range
  }
  return double(best) * width;
}

double percentile_threshold(const std::vector<double>& hist, double max, double percentile) {
  double total = 0, acc = 0;
  for (double h : hist) total += h;
  size_t k = 0;
  for (; k < hist.size(); ++k)
    if ((acc += hist[k]) >= total * percentile / 100.0) break;
  return (double(k) + 1) * max / double(hist.size());
}

double mse_threshold(const std::vector<double>& hist, double max) {
  const size_t nb = hist.size();
  const double width = max / double(nb);
  // Bin k stands for its centre c_k. Prefix sums of h, h*c and h*c^2 make each candidate O(1):
  // inside the range the error is min(noise, c^2) (values below half a step all round to 0), beyond it
  // the clipping error (c - t)^2 = c^2 - 2tc + t^2.
  std::vector<double> h0(nb + 1, 0.0), h1(nb + 1, 0.0), h2(nb + 1, 0.0);
  for (size_t k = 0; k < nb; ++k) {
    const double c = (double(k) + 0.5) * width;
    h0[k + 1] = h0[k] + hist[k];
    h1[k + 1] = h1[k] + hist[k] * c;
    h2[k + 1] = h2[k] + hist[k] * c * c;
  }
  double best_err = INFINITY;
  size_t best = nb;
  for (size_t i = 1; i <= nb; ++i) {
    const double t = double(i) * width, step = t / 127.0, noise = step * step / 12.0;
    size_t small = 0;  // bins whose centre squared is below the rounding noise: a few at most
    while (small < i) {
      const double c = (double(small) + 0.5) * width;
      if (c * c >= noise) break;
      ++small;
    }
    const double inside = h2[small] + noise * (h0[i] - h0[small]);
    const double clipped = (h2[nb] - h2[i]) - 2 * t * (h1[nb] - h1[i]) + t * t * (h0[nb] - h0[i]);
    const double err = inside + std::max(0.0, clipped);
    if (err < best_err) best_err = err, best = i;
  }
  return double(best) * width;
}

namespace {
// The model's own outputs among the probe's (which binds every op output), in the model's output order.
std::vector<std::vector<float>> graph_outputs(const Model& fp32, const Model& probe,
                                              const std::vector<std::vector<float>>& probe_outputs) {
  std::vector<std::vector<float>> r;
  for (const IoBinding& io : fp32.outputs)
    for (size_t i = 0; i < probe.outputs.size(); ++i)
      if (probe.outputs[i].tensor == io.tensor) r.push_back(probe_outputs[i]);
  return r;
}
}  // namespace

void run_float(const Engine& e, const Batch& batch, BatchOutputs& outputs) {
  const Model& m = e.model();
  outputs.resize(m.outputs.size());
  std::vector<const void*> in;
  std::vector<void*> out;
  for (const auto& v : batch) in.push_back(v.data());
  for (size_t i = 0; i < outputs.size(); ++i) {
    outputs[i].resize(element_count(m.tensors[m.outputs[i].tensor].shape));
    out.push_back(outputs[i].data());
  }
  e.run(in, out);
}

namespace {
// Per tensor, a histogram of |x| in kBins bins over [0, top[t]] (empty for tensors not watched).
using Histograms = std::vector<std::vector<double>>;

// The ranges every rule gives from histograms `hist` whose bins span [0, top[t]], for values whose
// observed maximum is `seen_max[t]` (<= top: a fold's maximum under the whole set's bins).
// `estimable[t]`: whether the whole set has values enough for a distribution (the folds, a part of it, are
// judged as the whole set's fit will be made).
RuleRanges ranges_from(const Histograms& hist, const std::vector<double>& top, const std::vector<double>& seen_max,
                       const std::vector<uint32_t>& watched, const std::vector<bool>& graph_io,
                       const std::vector<bool>& estimable, Calibrator rule, double percentile) {
  RuleRanges r;
  r.minmax.assign(seen_max.begin(), seen_max.end());
  r.entropy = r.percentile = r.mse = r.minmax;
  if (rule == Calibrator::kAuto) r.percentile_tail = r.minmax;
  if (rule == Calibrator::kMinMax) return r;
  for (uint32_t t : watched) {
    // Graph inputs and outputs keep their full range: clipping the user's data or results shows
    // directly; the calibrator's outlier suppression is for the tensors in between.
    if (seen_max[t] <= 0 || hist[t].empty() || graph_io[t] || !estimable[t]) continue;
    const auto cut = [&](Calibrator c, std::vector<float>& v, auto threshold) {
      if (rule == c || rule == Calibrator::kAuto) v[t] = float(std::min(seen_max[t], threshold()));
    };
    cut(Calibrator::kEntropy, r.entropy, [&] { return entropy_threshold(hist[t], top[t]); });
    cut(Calibrator::kMse, r.mse, [&] { return mse_threshold(hist[t], top[t]); });
    cut(Calibrator::kPercentile, r.percentile, [&] { return percentile_threshold(hist[t], top[t], percentile); });
    if (rule == Calibrator::kAuto)
      r.percentile_tail[t] = float(std::min(seen_max[t], percentile_threshold(hist[t], top[t], kTailPercentile)));
  }
  return r;
}
// CalibratedRanges::input_flushed: a value rounds to code 0 where |x| < step / 2 = amax / 254.
std::vector<double> flushed_shares(const Model& fp32, const std::vector<Batch>& batches, const std::vector<double>& amax) {
  std::vector<double> shares(fp32.inputs.size(), 0.0);
  for (size_t i = 0; i < fp32.inputs.size(); ++i) {
    const double half_step = amax[fp32.inputs[i].tensor] / 254.0;
    size_t nonzero = 0, flushed = 0;
    for (const Batch& b : batches)
      for (float x : b[i])
        if (x != 0 && std::isfinite(x)) ++nonzero, flushed += std::fabs(x) < half_step;
    shares[i] = nonzero ? double(flushed) / double(nonzero) : 0.0;
  }
  return shares;
}
}  // namespace

CalibratedRanges calibrate_all(const Model& fp32, const std::vector<Batch>& batches, Calibrator rule, double percentile,
                               size_t reference_batches, const Progress& progress) {
  // Expose every computed tensor as an output of a copy of the model.
  Model probe = fp32;
  probe.outputs.clear();
  probe.memory_plan = {};
  std::vector<uint32_t> watched;
  for (const IoBinding& io : probe.inputs) watched.push_back(io.tensor);
  for (const Op& op : probe.ops) {
    watched.push_back(op.outputs[0]);
    probe.outputs.push_back({op.outputs[0], TensorFormat::kLinear, {}});
  }
  finalize_model(probe);
  const Engine engine(std::move(probe));
  const Model& pm = engine.model();
  BatchOutputs outs;
  auto run = [&](const Batch& b) { run_float(engine, b, outs); };
  auto for_each_tensor = [&](const Batch& b, const auto& fn) {
    for (size_t i = 0; i < pm.inputs.size(); ++i) fn(pm.inputs[i].tensor, b[i]);
    for (size_t i = 0; i < pm.outputs.size(); ++i) fn(pm.outputs[i].tensor, outs[i]);
  };
  const size_t tensors = fp32.tensors.size();
  // kAuto keeps kCalibrationFolds folds apart (batch i belongs to fold i % folds).
  const size_t folds = rule == Calibrator::kAuto && batches.size() >= 2 ? std::min(kCalibrationFolds, batches.size()) : 1;
  // One pass: the maxima (min-max) and, for every other rule, histograms that grow with the maximum.
  const bool histograms = rule != Calibrator::kMinMax;
  std::vector<std::vector<double>> fold_max(folds, std::vector<double>(tensors, 0.0));
  std::vector<std::vector<GrowingHistogram>> grown(folds, std::vector<GrowingHistogram>(histograms ? tensors : 0));
  CalibratedRanges r;
  for (size_t i = 0; i < batches.size(); ++i) {
    run(batches[i]);
    std::vector<double>& amax = fold_max[i % folds];
    for_each_tensor(batches[i], [&](uint32_t t, const std::vector<float>& v) {
      if (histograms) {
        GrowingHistogram& h = grown[i % folds][t];
        h.add(v.data(), v.size());
        amax[t] = h.max();
        return;
      }
      for (float x : v)
        if (std::isfinite(x)) amax[t] = std::max(amax[t], double(std::fabs(x)));
    });
    if (i < reference_batches) r.reference_outputs.push_back(graph_outputs(fp32, pm, outs));
    if (progress) progress("calibration", i + 1, batches.size());
  }
  std::vector<double> amax = fold_max[0];
  for (size_t k = 1; k < folds; ++k)
    for (size_t t = 0; t < tensors; ++t) amax[t] = std::max(amax[t], fold_max[k][t]);
  if (!histograms) {
    r.input_flushed = flushed_shares(fp32, batches, amax);
    r.minmax.assign(amax.begin(), amax.end());
    r.entropy = r.percentile = r.mse = r.minmax;
    return r;
  }
  // Every fold's histogram over the same kBins bins of [0, amax] (the whole set's maximum), so they add up.
  std::vector<Histograms> hist(folds, Histograms(tensors));
  Histograms whole(tensors);
  for (uint32_t t : watched) {
    whole[t].assign(kBins, 0.0);
    for (size_t k = 0; k < folds; ++k) {
      hist[k][t] = grown[k][t].resample(kBins, amax[t]);
      for (size_t b = 0; b < kBins; ++b) whole[t][b] += hist[k][t][b];
    }
  }
  grown.clear();
  // Too few values to estimate a distribution (a global average gives one per channel and sample): the
  // histogram is mostly empty bins and any threshold looks as good as another, so the tensor keeps its
  // range. Decided on the whole set: a fold that decided on its own share would keep the range where the
  // whole set's fit clips, and kAuto would judge a rule other than the one it then applies.
  std::vector<bool> estimable(tensors, false);
  for (uint32_t t : watched) {
    double seen = 0;
    for (double h : whole[t]) seen += h;
    estimable[t] = seen >= kMinHistogramValues;
  }
  std::vector<bool> graph_io(tensors, false);
  for (const IoBinding& io : fp32.outputs) graph_io[io.tensor] = true;
  for (const IoBinding& io : fp32.inputs) graph_io[io.tensor] = true;
  // Fold k's ranges are fitted on every batch outside it: the whole set's counts less its own.
  for (size_t k = 0; k < folds && folds > 1; ++k) {
    Histograms& rest = hist[k];
    std::vector<double> rest_max(tensors, 0.0);
    for (size_t j = 0; j < folds; ++j)
      if (j != k)
        for (size_t t = 0; t < tensors; ++t) rest_max[t] = std::max(rest_max[t], fold_max[j][t]);
    for (uint32_t t : watched)
      for (size_t b = 0; b < kBins; ++b) rest[t][b] = std::max(0.0, whole[t][b] - rest[t][b]);
    r.folds.push_back(ranges_from(rest, amax, rest_max, watched, graph_io, estimable, rule, percentile));
  }
  static_cast<RuleRanges&>(r) = ranges_from(whole, amax, amax, watched, graph_io, estimable, rule, percentile);
  r.input_flushed = flushed_shares(fp32, batches, amax);
  return r;
}

std::vector<float> calibrate(const Model& fp32, const std::vector<Batch>& batches, Calibrator c, double percentile,
                             const Progress& progress) {
  return calibrate_all(fp32, batches, c, percentile, 0, progress).of(c);
}


std::map<std::string, float> parse_calibration_cache(std::string_view text, const std::string& path) {
  // Line by line over the text itself: no stream state, no std::stoul, nothing sized from the content.
  size_t at = 0, lineno = 0;
  const auto next_line = [&](std::string_view& line) {
    if (at >= text.size()) return false;
    const size_t nl = std::min(text.find('\n', at), text.size());
    line = text.substr(at, nl - at);
    at = nl + 1;
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    return true;
  };
  std::string_view line;
  if (!next_line(line) || !line.starts_with("TRT-"))
    fail("'", path, "' is not a TensorRT calibration cache (first line must be TRT-<version>-<Calibrator>)");
  std::map<std::string, float> scales;
  std::map<std::string, size_t> defined_at;
  while (next_line(line)) {
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
    if (line.empty()) continue;
    const size_t colon = line.rfind(':');
    if (colon == std::string_view::npos || colon == 0)
      fail("'", path, "' line ", lineno, ": expected '<tensor>: <8 hex digits>', got '", std::string(line.substr(0, 80)), "'");
    const std::string name(line.substr(0, colon));
    std::string_view hex = line.substr(colon + 1);
    while (!hex.empty() && hex.front() == ' ') hex.remove_prefix(1);
    uint32_t bits = 0;
    bool ok = hex.size() == 8;
    for (size_t k = 0; ok && k < hex.size(); ++k) {
      const char c = hex[k];
      const int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      ok = v >= 0;
      bits = (bits << 4) | uint32_t(ok ? v : 0);
    }
    if (!ok)
      fail("'", path, "' line ", lineno, ": tensor '", name, "': '", std::string(hex.substr(0, 40)),
           "' is not 8 hex digits (the big-endian bits of a float32 scale)");
    float scale;
    std::memcpy(&scale, &bits, 4);
    if (!std::isfinite(scale) || scale < 0)
      fail("'", path, "' line ", lineno, ": the scale of '", name, "' (", std::string(hex), ") is not a finite non-negative number");
    if (const auto [it, fresh] = defined_at.emplace(name, lineno); !fresh)
      fail("'", path, "' line ", lineno, ": tensor '", name, "' already has a scale on line ", it->second,
           "; keep one entry per tensor");
    scales[name] = scale;
  }
  return scales;
}

std::map<std::string, float> read_calibration_cache(const std::string& path) {
  const std::vector<uint8_t> bytes = read_file_bytes(path, "calibration cache", kMaxCalibrationCacheBytes);
  return parse_calibration_cache(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), path);
}

void write_calibration_cache(const std::string& path, const std::map<std::string, float>& scales,
                             const std::string& calibrator_name) {
  std::ofstream f(path);
  if (!f) fail("cannot write calibration cache '", path, "'");
  f << "TRT-8600-" << calibrator_name << "\n";
  for (const auto& [name, scale] : scales) {
    uint32_t bits;
    std::memcpy(&bits, &scale, 4);
    f << name << ": " << std::hex << std::setw(8) << std::setfill('0') << bits << std::dec << "\n";
  }
  if (!f) fail("failed writing '", path, "'");
}

}  // namespace softdla::builder
