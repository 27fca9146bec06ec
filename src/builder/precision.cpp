#include "precision.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <numeric>

#include "error.h"
#include "int8_range.h"
#include "io_layout.h"
#include "numerics.h"

namespace softdla::builder {

std::pair<int32_t, uint8_t> quant_multiplier(double r) {
  if (r == 0 || !std::isfinite(r)) return {0, 0};
  const double a = std::fabs(r);
  int shift = 30 - int(std::floor(std::log2(a)));  // a * 2^shift in [2^30, 2^31)
  shift = std::clamp(shift, 0, 62);
  double m = std::round(a * std::ldexp(1.0, shift));
  if (m >= 2147483647.0) m = 2147483647.0;
  return {int32_t(r < 0 ? -m : m), uint8_t(shift)};
}

bool supports_int8(const Op& op) {
  if (std::holds_alternative<LrnParams>(op.params) || std::holds_alternative<SoftmaxParams>(op.params)) return false;
  auto chain_ok = [](const SdpParams& p, bool conv) {
    for (size_t i = 0; i < p.steps.size(); ++i) {
      const SdpStep& s = p.steps[i];
      if ((s.kind == SdpKind::kSigmoid || s.kind == SdpKind::kTanh) && (conv || p.steps.size() != 1)) return false;
      if (conv && s.kind == SdpKind::kClip && s.lo != 0.f) return false;  // per-channel domains: only clipped ReLU
      if (conv && (is_eltwise(s.kind) || s.kind == SdpKind::kScale)) return false;
    }
    return true;
  };
  if (const auto* c = std::get_if<ConvParams>(&op.params)) return chain_ok(c->post, true);
  if (const auto* d = std::get_if<DeconvParams>(&op.params)) return chain_ok(d->post, true);
  if (const auto* s = std::get_if<SdpParams>(&op.params)) return chain_ok(*s, false);
  return true;
}

bool int8_average_as_convolution(const Op& op, const Model& fp32) {
  const auto* p = std::get_if<PoolParams>(&op.params);
  if (!p || p->kind != PoolKind::kAverage || p->exclude_padding) return false;
  const Shape& in = fp32.tensors[op.inputs[0]].shape;
  // The convolution's own limits (docs/LOADABLE.md): groups up to 8,192, strides up to 8, padding
  // smaller than the kernel.
  return in.size() == 4 && in[1] >= 1 && in[1] <= 8192 && p->stride_h <= 8 && p->stride_w <= 8 &&
         std::max(p->pad_top, p->pad_bottom) < p->kernel_h && std::max(p->pad_left, p->pad_right) < p->kernel_w;
}

std::vector<uint32_t> shared_range_groups(const Model& m, const std::vector<DataType>& precision) {
  std::vector<uint32_t> parent(m.tensors.size());
  std::iota(parent.begin(), parent.end(), 0u);
  auto find = [&](uint32_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  auto unite = [&](uint32_t a, uint32_t b) { parent[find(a)] = find(b); };
  for (size_t i = 0; i < m.ops.size(); ++i) {
    const Op& op = m.ops[i];
    const uint32_t out = op.outputs[0];
    if (i < precision.size() && precision[i] == DataType::kInt8 && int8_average_as_convolution(op, m)) continue;
    if (std::holds_alternative<PoolParams>(op.params) || std::holds_alternative<ResizeParams>(op.params) ||
        std::holds_alternative<SliceParams>(op.params) || std::holds_alternative<ShuffleParams>(op.params) ||
        std::holds_alternative<UnaryParams>(op.params) || std::holds_alternative<ReduceMaxParams>(op.params) ||
        std::holds_alternative<ConcatParams>(op.params)) {
      for (uint32_t in : op.inputs) unite(in, out);
    } else if (const auto* s = std::get_if<SdpParams>(&op.params)) {
      for (const SdpStep& st : s->steps)
        // Add, Sub, Max and Min compare or combine codes, so both sides share a scale; a product or a
        // quotient carries both scales in its integer domain and needs none shared.
        if (is_eltwise(st.kind) && st.kind != SdpKind::kEltMul && st.kind != SdpKind::kEltDiv)
          unite(op.inputs[0], uint32_t(st.tensor));
    }
  }
  std::vector<uint32_t> group(m.tensors.size());
  for (uint32_t t = 0; t < m.tensors.size(); ++t) group[t] = find(t);
  return group;
}

namespace {

// The position in op.inputs of an element-wise step's tensor operand (the op's data input is slot 0).
size_t operand_slot(const Op& op, const SdpStep& s) {
  return size_t(std::find(op.inputs.begin() + 1, op.inputs.end(), uint32_t(s.tensor)) - op.inputs.begin());
}

double largest_magnitude(const std::vector<float>& values) {
  double m = 0;
  for (float x : values) m = std::max(m, std::fabs(double(x)));
  return m;
}

// Gains or slopes as int32 multipliers over a right shift: the finest shift up to max_shift that keeps
// every |value| x 2^shift within int32 (15, Q15, for slopes as before; a gain of 2^31 or more cannot be
// one and is an error, not a wrapped multiplier).
void set_fixed_point(SdpStep& n, const std::vector<float>& values, int max_shift, const char* what) {
  const double amax = largest_magnitude(values);
  if (!(amax < std::ldexp(1.0, 31)))
    fail("an INT8 layer's ", what, " of ", amax, " is beyond its 32-bit multipliers; run the layer in FP16 "
         "(--layerPrecisions=<layer>:fp16) or fold the constant into the weights");
  const int sh = std::clamp(30 - int(std::ceil(std::log2(std::max(amax, 1e-30)))), 0, max_shift);
  for (float g : values) n.ivalues.push_back(int32_t(std::lround(double(g) * std::ldexp(1.0, sh))));
  n.shift = uint8_t(sh);
}

// The scale of one output channel's INT8 weights: amax / 127, unless the weights already lie on a grid of
// fewer levels (weights a model quantized itself: a DequantizeLinear's int8 codes times a per-tensor scale,
// or fake-quantized weights folded into floats), which it keeps, so the codes are the model's own and the
// products exact. The grid is amax / m for the largest m <= 127 that puts every weight within 3e-5 of a
// code (the float32 rounding of code x scale moves a code by at most 127 x 2^-23); 128 where amax is a
// negative weight at code -128. Weights on no such grid (any trained float weights) take amax / 127; a
// grid found only holds the weights more exactly than that one would.
double weight_grid_scale(const std::vector<double>& weights, double amax) {
  constexpr double kTolerance = 3e-5;
  const bool negative_peak = std::any_of(weights.begin(), weights.end(), [&](double v) { return v == -amax; });
  for (int m = negative_peak ? 128 : 127; m >= 1; --m) {
    const double step = amax / m;
    const bool on_grid = std::all_of(weights.begin(), weights.end(), [&](double v) {
      const double code = v / step;
      return std::fabs(code - std::nearbyint(code)) <= kTolerance && code <= 127.5;
    });
    if (on_grid) return step;
  }
  return scale_from_amax(amax);
}

float f32_at(const Constant& c, size_t i) {
  float v;
  std::memcpy(&v, c.data.data() + 4 * i, 4);
  return v;
}

// A weight of inf or NaN has no INT8 code: its channel's scale would become inf and every code 0, a
// silent wrong result (FP16 saturates it as the DLA does). Refused, naming the layer.
void require_finite_weights(const std::string& layer, const Constant& w) {
  for (size_t i = 0; i < w.data.size() / 4; ++i)
    if (const float v = f32_at(w, i); !std::isfinite(v))
      fail("layer '", layer, "': its weights hold ", v, " (element ", i, "); INT8 weights must be finite numbers: "
           "fix the model's weights, or run the layer in FP16 (--layerPrecisions=", layer, ":fp16 "
           "--precisionConstraints=obey)");
}

class Converter {
 public:
  Converter(const Lowered& l, const PrecisionPlan& p) : src_(l.model), lowered_(l), plan_(p) {}

  Model run() {
    out_.target = src_.target;
    out_.build_info = src_.build_info;
    mapped_.assign(src_.tensors.size(), {});
    // Graph inputs take their I/O type.
    for (size_t i = 0; i < src_.inputs.size(); ++i) {
      const uint32_t t = src_.inputs[i].tensor;
      const uint32_t n = add_tensor(src_.tensors[t], plan_.inputs[i].dtype, scale_of(t));
      mapped_[t][plan_.inputs[i].dtype] = n;
      out_.inputs.push_back({n, plan_.inputs[i].format, {}});
      apply_qdq_pair(t);
    }
    for (size_t i = 0; i < src_.ops.size(); ++i) convert_op(i);
    for (size_t i = 0; i < src_.outputs.size(); ++i) {
      const uint32_t t = src_.outputs[i].tensor;
      const uint32_t n = in_type(t, plan_.outputs[i].dtype, "output conversion");
      out_.outputs.push_back({n, plan_.outputs[i].format, {}});
    }
    name_io_tensors();
    return std::move(out_);
  }

 private:
  const Model& src_;
  const Lowered& lowered_;
  const PrecisionPlan& plan_;
  Model out_;
  std::vector<std::map<DataType, uint32_t>> mapped_;  // source tensor -> its copy in each type

  // Users look I/O tensors up by name: each binding carries the ONNX graph's name, whatever conversions
  // or copies produced it; an internal tensor that held the name gives it up and is suffixed instead.
  void name_io_tensors() {
    std::map<uint32_t, std::string> io_name;
    for (size_t i = 0; i < out_.inputs.size() && i < lowered_.input_names.size(); ++i)
      io_name[out_.inputs[i].tensor] = lowered_.input_names[i];
    for (size_t i = 0; i < out_.outputs.size() && i < lowered_.output_names.size(); ++i)
      io_name[out_.outputs[i].tensor] = lowered_.output_names[i];
    check_io_names(lowered_.input_names, lowered_.output_names);
    std::set<std::string> taken;
    for (const auto& [t, name] : io_name) {
      taken.insert(name);
      out_.tensors[t].name = name;
    }
    for (uint32_t t = 0; t < out_.tensors.size(); ++t) {
      if (io_name.count(t) || !taken.count(out_.tensors[t].name)) continue;
      std::string name = out_.tensors[t].name + "_" + to_string(out_.tensors[t].dtype);
      for (int k = 2; taken.count(name); ++k) name = out_.tensors[t].name + "_" + std::to_string(k);
      out_.tensors[t].name = name;
    }
  }

  // The scale of t's Q/DQ pair, or 0 where it has none.
  double qdq_scale(uint32_t t) const {
    auto it = lowered_.qdq_amax.find(t);
    // Only where the plan has INT8 scales (an --int8 build): an FP16-only build ignores the pairs.
    return it != lowered_.qdq_amax.end() && it->second > 0 && plan_.amax[t] > 0 ? scale_from_amax(it->second) : 0.0;
  }
  // A Q/DQ pair's tensor holds its values rounded and saturated to the pair's scale, whatever the
  // precision of the layers around it: made in FP16 (its producer had no INT8 scale to read), it is
  // quantized to the pair's scale at once, and every FP16 reader takes that INT8 copy converted back
  // (the pair's DequantizeLinear), not the unquantized value. Where the tensor's planned scale is
  // coarser than the pair's (tensors that share a scale take the largest), the pair's INT8 is
  // requantized to it, so the pair's saturation still applies.
  void apply_qdq_pair(uint32_t t) {
    const double qs = qdq_scale(t);
    auto& copies = mapped_[t];
    if (qs <= 0 || copies.empty()) return;
    const Tensor& st = src_.tensors[t];
    const double planned = scale_of(t);
    const bool raised = planned > qs * (1 + 1e-6);  // not the float noise between the two records of one scale
    if (copies.count(DataType::kInt8)) {
      // INT8 already (an op wrote it, which convert_op handles, or an INT8 graph input): an input at a
      // raised scale still passes the pair's saturation, requantized to the pair's scale and back.
      const uint32_t q = copies[DataType::kInt8];
      if (raised && std::any_of(out_.inputs.begin(), out_.inputs.end(), [&](const IoBinding& b) { return b.tensor == q; }))
        copies[DataType::kInt8] = through_pair_scale(t, q, planned, qs);
      return;
    }
    const uint32_t from = copies.begin()->second;
    uint32_t q = add_tensor(st, DataType::kInt8, float(raised ? qs : planned), "_int8");
    out_.ops.push_back({"Q/DQ of " + st.name, {from}, {q}, ConvertParams{}});
    if (raised) q = requantize(t, q, qs, planned, "Q/DQ of " + st.name);
    copies.clear();
    copies[DataType::kInt8] = q;
  }
  // q (t in INT8 at `planned`) requantized to its pair's finer scale qs, which rounds and saturates as the
  // pair does, and back to `planned`, the scale its readers share.
  uint32_t through_pair_scale(uint32_t t, uint32_t q, double planned, double qs) {
    const std::string name = "Q/DQ of " + src_.tensors[t].name;
    return requantize(t, requantize(t, q, planned, qs, name), qs, planned, name + " (shared scale)");
  }
  // An INT8 copy of source tensor t at `to`, requantized from `q` at `from`.
  uint32_t requantize(uint32_t t, uint32_t q, double from, double to, const std::string& name) {
    const uint32_t fixed = add_tensor(src_.tensors[t], DataType::kInt8, float(to));
    SdpParams rq;
    const auto [m, sh] = quant_multiplier(from / to);
    rq.requant = {{m}, {sh}};
    out_.ops.push_back({name + " (requantize)", {q}, {fixed}, rq});
    return fixed;
  }

  float scale_of(uint32_t t) const {
    const float a = plan_.amax[t];
    return a > 0 ? float(scale_from_amax(a)) : 1.f;
  }
  uint32_t add_tensor(const Tensor& like, DataType dtype, float scale, const std::string& suffix = "") {
    Tensor t = like;
    t.name += suffix;
    t.dtype = dtype;
    t.scale = dtype == DataType::kInt8 ? scale : 1.f;
    t.constant = -1;
    out_.tensors.push_back(t);
    return uint32_t(out_.tensors.size() - 1);
  }
  // The source tensor t in type `want`, converting (once) if needed; constants are re-encoded.
  uint32_t in_type(uint32_t t, DataType want, const std::string& why) {
    auto& copies = mapped_[t];
    if (auto it = copies.find(want); it != copies.end()) return it->second;
    const Tensor& st = src_.tensors[t];
    if (st.constant >= 0) {
      const uint32_t n = add_tensor(st, want, scale_of(t));
      out_.tensors[n].constant = encode_constant(src_.constants[size_t(st.constant)], want, out_.tensors[n].scale);
      return copies[want] = n;
    }
    if (copies.empty()) fail("internal: tensor '", st.name, "' used before it is produced (", why, ")");
    const uint32_t from = copies.begin()->second;
    const uint32_t n = add_tensor(st, want, scale_of(t), std::string("_") + to_string(want));
    out_.ops.push_back({"convert " + st.name + " to " + to_string(want), {from}, {n}, ConvertParams{}});
    return copies[want] = n;
  }
  int32_t encode_constant(const Constant& c, DataType want, float scale) {
    const size_t count = c.data.size() / 4;
    Constant k{want, c.dims, std::vector<uint8_t>(count * element_size(want))};
    for (size_t i = 0; i < count; ++i) {
      const float v = f32_at(c, i);
      if (want == DataType::kFloat32) std::memcpy(&k.data[4 * i], &v, 4);
      else if (want == DataType::kFloat16) {
        const uint16_t h = num::float_to_half(v);
        std::memcpy(&k.data[2 * i], &h, 2);
      } else {
        k.data[i] = uint8_t(num::quantize(v / scale));
      }
    }
    out_.constants.push_back(std::move(k));
    return int32_t(out_.constants.size() - 1);
  }

  // The depthwise convolution of an INT8 average pool (int8_average_as_convolution): C x 1 x kh x kw
  // weights of 1/(kh kw), held aside (the source model's constants are not ours to extend) and marked
  // by an index no source constant has.
  static constexpr uint32_t kAverageWeights = UINT32_MAX;
  Constant average_;
  ConvParams average_weights(const PoolParams& pool, uint32_t channels) {
    const size_t n = size_t(channels) * pool.kernel_h * pool.kernel_w;
    const float w = 1.f / float(pool.kernel_h * pool.kernel_w);
    average_ = Constant{DataType::kFloat32, {channels, 1, pool.kernel_h, pool.kernel_w}, std::vector<uint8_t>(4 * n)};
    for (size_t i = 0; i < n; ++i) std::memcpy(&average_.data[4 * i], &w, 4);
    ConvParams c;
    c.weights = kAverageWeights;
    c.groups = channels;
    c.stride_h = pool.stride_h, c.stride_w = pool.stride_w;
    c.pad_top = pool.pad_top, c.pad_left = pool.pad_left, c.pad_bottom = pool.pad_bottom, c.pad_right = pool.pad_right;
    return c;
  }

  void convert_op(size_t i);
  SdpParams int8_conv_post(const SdpParams& p, const std::vector<double>& acc_scale, double out_scale);
  SdpParams int8_sdp(const Op& op, const SdpParams& p, double in_scale, double out_scale,
                     const std::vector<uint32_t>& new_inputs);
  int int8_sdp_room(const Op& op, const SdpParams& p, double in_scale, const std::vector<uint32_t>& new_inputs) const;
  double operand_scale(const Op& op, const SdpStep& s, const std::vector<uint32_t>& new_inputs) const;
  uint32_t per_channel_int8_weights(const Constant& w, size_t k_axis_dim, bool k_is_dim1, const std::vector<double>& floor,
                                    double zero_scale, std::vector<double>& wscale);
};

// `floor`: the smallest scale each channel may take (so its bias stays inside int32); `zero_scale`: the
// scale of a channel whose weights are all zero (any scale gives codes of 0; its bias needs a fine one).
uint32_t Converter::per_channel_int8_weights(const Constant& w, size_t K, bool k_is_dim1, const std::vector<double>& floor,
                                             double zero_scale, std::vector<double>& wscale) {
  const size_t count = w.data.size() / 4;
  // Layouts: conv [K, C, R, S] (k outermost), deconv [C, K, R, S].
  const size_t inner = k_is_dim1 ? count / (size_t(w.dims[0]) * K) : count / K;
  auto k_of = [&](size_t i) { return k_is_dim1 ? (i / inner) % K : i / inner; };
  wscale.resize(K);
  const size_t outer = count / (K * inner);  // deconv: the C blocks each channel has one run of `inner` in
  std::vector<double> channel;
  for (size_t k = 0; k < K; ++k) {
    channel.clear();
    for (size_t b = 0; b < (k_is_dim1 ? outer : 1); ++b)
      for (size_t j = 0; j < inner; ++j) channel.push_back(f32_at(w, ((b * K) + k) * inner + j));
    double amax = 0;
    for (double v : channel) amax = std::max(amax, std::fabs(v));
    wscale[k] = std::max(amax > 0 ? weight_grid_scale(channel, amax) : zero_scale, floor[k]);
  }
  Constant q{DataType::kInt8, w.dims, std::vector<uint8_t>(count)};
  for (size_t i = 0; i < count; ++i) q.data[i] = uint8_t(num::quantize(float(double(f32_at(w, i)) / wscale[k_of(i)])));
  out_.constants.push_back(std::move(q));
  return uint32_t(out_.constants.size() - 1);
}

SdpParams Converter::int8_conv_post(const SdpParams& p, const std::vector<double>& acc, double out_scale) {
  SdpParams r;
  const size_t K = acc.size();
  for (const SdpStep& s : p.steps) {
    SdpStep n;
    n.kind = s.kind;
    switch (s.kind) {
      case SdpKind::kBias:
        for (size_t k = 0; k < K; ++k) {
          const double b = s.fvalues[s.fvalues.size() == 1 ? 0 : k] / acc[k];
          n.ivalues.push_back(int32_t(std::clamp(std::round(b), -2147483648.0, 2147483647.0)));
        }
        break;
      case SdpKind::kPRelu:  // slope in Q15 (coarser for slopes of 2^15 or more), in the accumulator domain
        set_fixed_point(n, s.fvalues, 15, "slope");
        break;
      case SdpKind::kClip:  // clipped ReLU: ReLU here; the upper bound is the output scale's saturation
        n.kind = SdpKind::kRelu;
        break;
      case SdpKind::kRelu:
        break;
      default:
        fail("internal: step ", to_string(s.kind), " in an INT8 convolution");
    }
    r.steps.push_back(n);
  }
  for (size_t k = 0; k < K; ++k) {
    const auto [m, sh] = quant_multiplier(acc[k] / out_scale);
    r.requant.multiplier.push_back(m);
    r.requant.shift.push_back(sh);
  }
  return r;
}

SdpParams Converter::int8_sdp(const Op& op, const SdpParams& p, double in_scale, double out_scale,
                              const std::vector<uint32_t>& new_inputs) {
  SdpParams r;
  if (p.steps.size() == 1 && (p.steps[0].kind == SdpKind::kSigmoid || p.steps[0].kind == SdpKind::kTanh)) {
    r.requant = {{1}, {0}};
    r.lut = p.steps[0].kind == SdpKind::kSigmoid ? ActivationLut::kSigmoid : ActivationLut::kTanh;
    r.lut_input_scale = float(in_scale);
    return r;
  }
  // Work in a finer integer domain than the input's (2^room steps a code) so bias and scale keep their
  // precision, as fine as int32 allows for every input (int8_sdp_room).
  const int room = int8_sdp_room(op, p, in_scale, new_inputs);
  double domain = std::ldexp(in_scale, -room);
  if (room != 0) {
    SdpStep up;
    up.kind = SdpKind::kScale;
    up.ivalues = {room > 0 ? int32_t(1) << room : 1};  // below 0: a rounding shift down
    up.shift = uint8_t(room > 0 ? 0 : -room);
    r.steps.push_back(up);
  }
  for (const SdpStep& s : p.steps) {
    SdpStep n;
    n.kind = s.kind;
    switch (s.kind) {
      case SdpKind::kBias:
        for (float b : s.fvalues) n.ivalues.push_back(int32_t(std::clamp(std::round(b / domain), -2147483648.0, 2147483647.0)));
        break;
      case SdpKind::kScale:
        set_fixed_point(n, s.fvalues, 62, "gain");
        break;
      case SdpKind::kPRelu:
        set_fixed_point(n, s.fvalues, 15, "slope");
        break;
      case SdpKind::kRelu:
        break;
      case SdpKind::kClip:
        n.lo_i = int32_t(std::clamp(std::round(double(s.lo) / domain), -2147483648.0, 2147483647.0));
        n.hi_i = int32_t(std::clamp(std::round(double(s.hi) / domain), -2147483648.0, 2147483647.0));
        break;
      default: {  // element-wise with a tensor
        n.tensor = int32_t(new_inputs[operand_slot(op, s)]);
        const double e_scale = out_.tensors[uint32_t(n.tensor)].scale;
        if (s.kind == SdpKind::kEltMul) {
          n.tensor_multiplier = 1, n.tensor_shift = 0;
          n.shift = 0;
          domain *= e_scale;  // v * e carries both scales
        } else if (s.kind == SdpKind::kEltDiv) {
          // v / e: the quotient's domain is domain / e_scale. v sits 2^room above its int8 code (the
          // step before; 16 unless large constants take room), so the quotient keeps bits beyond an
          // int8 result's.
          n.tensor_multiplier = 1, n.tensor_shift = 0;
          n.shift = 0;
          domain /= e_scale;
        } else {
          const auto [m, sh] = quant_multiplier(e_scale / domain);
          n.tensor_multiplier = m, n.tensor_shift = sh;
        }
      }
    }
    r.steps.push_back(n);
  }
  const auto [m, sh] = quant_multiplier(domain / out_scale);
  r.requant = {{m}, {sh}};
  return r;
}

double Converter::operand_scale(const Op& op, const SdpStep& s, const std::vector<uint32_t>& new_inputs) const {
  return out_.tensors[new_inputs[operand_slot(op, s)]].scale;
}

// How many bits finer than the input's scale an INT8 SDP chain computes in: 16 where the chain has a bias,
// a scale, a clip's bounds, a slope or an element-wise step (0 for ReLU alone), fewer where some step could otherwise leave int32 for
// some int8 input and operand codes (every step saturates to int32): the bound of |v| is followed through
// the chain (a bias adds its value, a scale multiplies by its gain, an element-wise operand adds its
// rescaled codes or multiplies by 128), and room shrinks until the bound stays below 2^30. Below 0 the
// chain works on a coarser grid than its input: only for constants so large (a bias above 2^14 input
// steps) that the output's scale is coarser still.
int Converter::int8_sdp_room(const Op& op, const SdpParams& p, double in_scale, const std::vector<uint32_t>& new_inputs) const {
  const bool needs_room = std::any_of(p.steps.begin(), p.steps.end(), [](const SdpStep& s) {
    return s.kind == SdpKind::kBias || s.kind == SdpKind::kScale || s.kind == SdpKind::kClip ||
           s.kind == SdpKind::kPRelu || is_eltwise(s.kind);
  });
  if (!needs_room) return 0;
  auto peak = [&](int room) {  // the largest |v| any step can reach, in the chain's integer domain
    double domain = std::ldexp(in_scale, -room), v = std::ldexp(128.0, room), most = v;
    for (const SdpStep& s : p.steps) {
      switch (s.kind) {
        case SdpKind::kBias: v += largest_magnitude(s.fvalues) / domain + 1; break;
        case SdpKind::kScale: v *= largest_magnitude(s.fvalues) * (1 + 1e-6); break;
        case SdpKind::kPRelu: v *= std::max(1.0, largest_magnitude(s.fvalues)); break;
        case SdpKind::kRelu: break;
        case SdpKind::kClip: v = std::min(v, std::max(std::fabs(double(s.lo)), std::fabs(double(s.hi))) / domain + 1); break;
        case SdpKind::kEltMul: v *= 128, domain *= operand_scale(op, s, new_inputs); break;
        case SdpKind::kEltDiv: domain /= operand_scale(op, s, new_inputs); break;
        case SdpKind::kEltMax:
        case SdpKind::kEltMin: v = std::max(v, 128 * operand_scale(op, s, new_inputs) / domain + 1); break;
        default: v += 128 * operand_scale(op, s, new_inputs) / domain + 1; break;  // add, subtract
      }
      most = std::max(most, v);
    }
    return most;
  };
  constexpr int kRoom = 16, kCoarsest = -60;
  int room = kRoom;
  while (room > kCoarsest && !(peak(room) < std::ldexp(1.0, 30))) --room;
  return room;
}

void Converter::convert_op(size_t i) {
  const Op& op = src_.ops[i];
  const DataType P = plan_.op_precision[i];
  const uint32_t so = op.outputs[0];
  std::vector<uint32_t> inputs;
  for (uint32_t t : op.inputs) inputs.push_back(in_type(t, P, op.name));
  // A Q/DQ pair's op outside INT8 (its input has no INT8 scale): the input quantized to the pair's scale
  // is all it computes, one conversion with no FP16 copy before it.
  if (const auto* sdp = std::get_if<SdpParams>(&op.params);
      sdp && P != DataType::kInt8 && qdq_scale(so) > 0 && sdp->steps.empty() && sdp->requant.multiplier.empty() &&
      sdp->lut == ActivationLut::kNone && inputs.size() == 1) {
    mapped_[so] = {{P, inputs[0]}};
    return apply_qdq_pair(so);
  }
  double out_scale = scale_of(so);
  // Clipped ReLU in INT8 clips by saturating at the bound: the op writes at scale hi/127, and a
  // requantize follows when the tensor's planned scale differs.
  double demanded = 0;
  auto clip_hi = [&](const SdpParams& p) {
    for (const SdpStep& s : p.steps)
      if (s.kind == SdpKind::kClip && s.lo == 0.f) demanded = scale_from_amax(double(s.hi));
  };
  OpParams params = op.params;
  if (P == DataType::kInt8 && int8_average_as_convolution(op, src_)) params = average_weights(std::get<PoolParams>(op.params), src_.tensors[op.inputs[0]].shape[1]);
  if (P == DataType::kInt8) {
    if (const auto* c = std::get_if<ConvParams>(&op.params)) clip_hi(c->post);
    if (const auto* d = std::get_if<DeconvParams>(&op.params)) clip_hi(d->post);
  }
  auto relu_for_clip = [&params] {
    auto in_post = [](SdpParams& post) {
      SdpStep relu;
      relu.kind = SdpKind::kRelu;
      for (SdpStep& st : post.steps)
        if (st.kind == SdpKind::kClip && st.lo == 0.f) st = relu;
    };
    if (auto* c = std::get_if<ConvParams>(&params)) in_post(c->post);
    if (auto* d = std::get_if<DeconvParams>(&params)) in_post(d->post);
  };
  if (demanded > 0 && out_scale < demanded * (1 - 1e-9)) {
    // The planned scale saturates below the clip's bound (a ReLU6 output calibrated under 6): there
    // a ReLU requantized straight to that scale clips too, in one op and with one rounding instead of
    // two, so no requantize op follows (issue 15). A planned scale above the bound keeps the two ops.
    relu_for_clip();
    demanded = 0;
  }
  // A Q/DQ pair whose scale was raised to a shared, coarser one: the op writes at the pair's scale (its
  // rounding and saturation) and a requantize to the planned scale follows; below a clip's bound that
  // saturation is the clip.
  // Ops that keep their input's scale (pools, concatenations, copies) cannot: their result is requantized
  // to the pair's scale and back.
  const double raised_qdq = P == DataType::kInt8 && qdq_scale(so) > 0 && qdq_scale(so) < out_scale * (1 - 1e-6)
                                ? qdq_scale(so) : 0.0;
  const bool rescales = std::holds_alternative<ConvParams>(op.params) || std::holds_alternative<DeconvParams>(op.params) ||
                        std::holds_alternative<SdpParams>(op.params);
  if (const double qs = raised_qdq; qs > 0 && rescales && (demanded == 0 || qs < demanded)) {
    if (demanded > 0) relu_for_clip();
    demanded = qs;
  }
  const double write_scale = demanded > 0 ? demanded : out_scale;
  const uint32_t out = add_tensor(src_.tensors[so], P, float(write_scale), demanded > 0 && demanded != out_scale ? "_clipped" : "");
  std::visit(
      [&](auto& p) {
        using T = std::decay_t<decltype(p)>;
        if constexpr (std::is_same_v<T, ConvParams> || std::is_same_v<T, DeconvParams>) {
          const Constant& w = p.weights == kAverageWeights ? average_ : src_.constants[p.weights];
          if (P == DataType::kInt8) {
            const bool deconv = std::is_same_v<T, DeconvParams>;
            const size_t K = deconv ? w.dims[1] : w.dims[0];
            require_finite_weights(op.name, w);
            std::vector<double> wscale;
            const double sx = out_.tensors[inputs[0]].scale;
            // The bias is added in the accumulator's domain (sx x the channel's weight scale) in int32: a
            // channel of tiny weights takes a coarser scale where its bias would pass 2^30 steps, and one of
            // zero weights (a pruned filter, a BN with gamma 0) a scale that keeps its bias 2^16 times finer
            // than the output's step.
            std::vector<double> floor(K, 0.0);
            for (const SdpStep& st : p.post.steps)
              if (st.kind == SdpKind::kBias)
                for (size_t k = 0; k < K; ++k)
                  floor[k] = std::max(floor[k], std::fabs(double(st.fvalues[st.fvalues.size() == 1 ? 0 : k])) /
                                                    (sx * std::ldexp(1.0, 30)));
            p.weights = per_channel_int8_weights(w, K, deconv, floor, write_scale / (sx * 65536.0), wscale);
            for (double& s : wscale) s *= sx;  // accumulator scale per output channel
            p.post = int8_conv_post(p.post, wscale, write_scale);
          } else {
            p.weights = uint32_t(encode_constant(w, P, 1.f));
          }
        } else if constexpr (std::is_same_v<T, SdpParams>) {
          if (P == DataType::kInt8) {
            p = int8_sdp(op, p, out_.tensors[inputs[0]].scale, write_scale, inputs);
          } else {
            for (SdpStep& s : p.steps)
              if (is_eltwise(s.kind)) {
                s.tensor = int32_t(inputs[operand_slot(op, s)]);
              }
          }
        }
      },
      params);
  out_.ops.push_back({op.name, inputs, {out}, params});
  mapped_[so].clear();
  if (demanded > 0 && std::fabs(demanded - out_scale) > 1e-12 * out_scale) {
    mapped_[so][P] = requantize(so, out, demanded, out_scale, op.name);
  } else if (raised_qdq > 0 && !rescales) {
    mapped_[so][P] = through_pair_scale(so, out, out_scale, raised_qdq);
  } else {
    mapped_[so][P] = out;
  }
  apply_qdq_pair(so);
}

}  // namespace

void check_io_names(const std::vector<std::string>& inputs, const std::vector<std::string>& outputs) {
  for (const std::string& out : outputs)
    if (std::find(inputs.begin(), inputs.end(), out) != inputs.end())
      fail("graph output '", out, "' is a graph input itself: a DLA loadable writes each output into a buffer of "
           "its own and cannot hand an input back; drop it from the outputs (it is the input you have)");
  std::set<std::string> taken, descriptor_names;
  std::vector<std::string> names = inputs;
  names.insert(names.end(), outputs.begin(), outputs.end());
  for (const std::string& name : names) {
    if (!taken.insert(name).second) {
      if (std::count(outputs.begin(), outputs.end(), name) > 1)
        fail("graph output '", name, "' is listed more than once; a DLA loadable binds each output once: list it once");
      fail("two graph inputs/outputs are both named '", name, "'; tensor names must be unique");
    }
    if (!descriptor_names.insert(descriptor_name(name)).second)
      fail("graph inputs/outputs '", name, "' and another share their first ", kDescriptorNameMaxBytes,
           " bytes, all that cuDLA's tensor descriptors keep of a name; rename one");
  }
}

Model apply_precision(const Lowered& l, const PrecisionPlan& p) { return Converter(l, p).run(); }

}  // namespace softdla::builder
