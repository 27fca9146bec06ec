// A loadable that uses every op kind and every SDP step, built in C++ for the round-trip, corruption
// and planner tests and the benchmarks. Weights come from a fixed-seed generator.
#pragma once
#include <cstring>
#include <random>

#include "model.h"

namespace softdla::testing {

class ModelBuilder {
 public:
  explicit ModelBuilder(Target target = Target::kOrin) { m.target = target; }

  uint32_t tensor(const std::string& name, Shape s, DataType t, float scale = 1.f) {
    m.tensors.push_back({name, s, t, scale, -1});
    return uint32_t(m.tensors.size() - 1);
  }
  uint32_t input(const std::string& name, Shape s, DataType t, float scale, TensorFormat f) {
    const uint32_t i = tensor(name, s, t, scale);
    m.inputs.push_back({i, f, {}});
    return i;
  }
  void output(uint32_t t, TensorFormat f) { m.outputs.push_back({t, f, {}}); }

  template <class T>
  uint32_t constant(DataType t, std::vector<uint32_t> dims, const std::vector<T>& values) {
    Constant c{t, std::move(dims), {}};
    c.data.resize(values.size() * sizeof(T));
    std::memcpy(c.data.data(), values.data(), c.data.size());
    m.constants.push_back(std::move(c));
    return uint32_t(m.constants.size() - 1);
  }
  std::vector<int8_t> random_int8(size_t n) {
    std::uniform_int_distribution<int> d(-128, 127);
    std::vector<int8_t> v(n);
    for (auto& x : v) x = int8_t(d(rng));
    return v;
  }
  std::vector<uint16_t> random_half(size_t n) {  // values in [-1, 1) as fp16 bits
    std::uniform_int_distribution<int> d(-1024, 1023);
    std::vector<uint16_t> v(n);
    for (auto& x : v) {
      const int k = d(rng);
      // exact small fp16 values k/1024
      const float f = float(k) / 1024.f;
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      x = f == 0.f ? 0 : uint16_t(((bits >> 16) & 0x8000) | ((((bits >> 23) & 0xff) - 112) << 10) | ((bits >> 13) & 0x3ff));
    }
    return v;
  }
  void op(const std::string& name, std::vector<uint32_t> in, uint32_t out, OpParams p) {
    m.ops.push_back({name, std::move(in), {out}, std::move(p)});
  }

  Model m;
  std::mt19937 rng{1234};
};

inline SdpStep step(SdpKind kind) {
  SdpStep s;
  s.kind = kind;
  return s;
}
inline SdpStep step_i(SdpKind kind, std::vector<int32_t> values, uint8_t shift = 0) {
  SdpStep s = step(kind);
  s.ivalues = std::move(values);
  s.shift = shift;
  return s;
}
inline SdpStep step_f(SdpKind kind, std::vector<float> values) {
  SdpStep s = step(kind);
  s.fvalues = std::move(values);
  return s;
}

// INT8 stem (conv+bias+relu, pool, eltwise, resize, concat, slice, shuffle, abs, reduce, deconv, LUT),
// then an FP16 head (convert, LRN, softmax, conv with sigmoid).
inline Model make_sample_model(Target target = Target::kOrin) {
  ModelBuilder b(target);
  const DataType i8 = DataType::kInt8, f16 = DataType::kFloat16;
  const uint32_t x = b.input("images", {1, 3, 16, 16}, i8, 1.f / 127, TensorFormat::kDlaHwc4);
  const uint32_t c1 = b.tensor("conv1", {1, 8, 16, 16}, i8, 0.05f);
  ConvParams conv;
  conv.weights = b.constant(i8, {8, 3, 3, 3}, b.random_int8(8 * 27));
  conv.pad_top = conv.pad_left = conv.pad_bottom = conv.pad_right = 1;
  conv.post.steps = {step_i(SdpKind::kBias, std::vector<int32_t>(8, 100)), step(SdpKind::kRelu)};
  conv.post.requant = {{12345}, {18}};
  b.op("conv1", {x}, c1, conv);

  const uint32_t p1 = b.tensor("pool1", {1, 8, 8, 8}, i8, 0.05f);
  PoolParams max2;
  max2.kernel_h = max2.kernel_w = max2.stride_h = max2.stride_w = 2;
  b.op("pool1", {c1}, p1, max2);
  const uint32_t p2 = b.tensor("pool2", {1, 8, 8, 8}, i8, 0.05f);
  PoolParams avg;
  avg.kind = PoolKind::kAverage;
  avg.kernel_h = avg.kernel_w = 3;
  avg.stride_h = avg.stride_w = 2;
  avg.pad_top = avg.pad_left = 1;
  b.op("pool2", {c1}, p2, avg);
  const uint32_t e1 = b.tensor("add", {1, 8, 8, 8}, i8, 0.05f);
  SdpParams add;
  SdpStep elt = step(SdpKind::kEltAdd);
  elt.tensor = int32_t(p2);
  add.steps = {elt, step_i(SdpKind::kPRelu, {3}, 2)};
  add.requant = {{1}, {0}};
  b.op("add", {p1, p2}, e1, add);
  const uint32_t r1 = b.tensor("up", {1, 8, 16, 16}, i8, 0.05f);
  b.op("up", {e1}, r1, ResizeParams{ResizeMode::kBilinear, 2, 2, NearestRounding::kAsymmetricFloor});
  const uint32_t cat = b.tensor("cat", {1, 16, 16, 16}, i8, 0.05f);
  b.op("cat", {r1, c1}, cat, ConcatParams{});
  const uint32_t sl = b.tensor("slice", {1, 12, 14, 15}, i8, 0.05f);
  b.op("slice", {cat}, sl, SliceParams{{0, 2, 1, 0}});
  const uint32_t sh = b.tensor("shuffle", {1, 14, 12, 15}, i8, 0.05f);
  b.op("shuffle", {sl}, sh, ShuffleParams{{0, 2, 1, 3}});
  const uint32_t ab = b.tensor("abs", {1, 14, 12, 15}, i8, 0.05f);
  b.op("abs", {sh}, ab, UnaryParams{});
  const uint32_t rd = b.tensor("rmax", {1, 14, 1, 15}, i8, 0.05f);
  b.op("rmax", {ab}, rd, ReduceMaxParams{{2}});
  const uint32_t dc = b.tensor("deconv", {1, 4, 2, 30}, i8, 0.1f);
  DeconvParams de;
  de.weights = b.constant(i8, {14, 4, 2, 2}, b.random_int8(14 * 4 * 4));
  de.stride_h = de.stride_w = 2;
  de.post.requant = {{1, 2, 3, 4}, {8, 8, 9, 9}};
  de.post.lut = ActivationLut::kSigmoid;
  de.post.lut_input_scale = 0.08f;
  b.op("deconv", {rd}, dc, de);
  // FP16 head
  const uint32_t cv = b.tensor("to_fp16", {1, 4, 2, 30}, f16);
  b.op("to_fp16", {dc}, cv, ConvertParams{});
  const uint32_t lrn = b.tensor("lrn", {1, 4, 2, 30}, f16);
  b.op("lrn", {cv}, lrn, LrnParams{3, 1e-3f, 0.75f, 1.f});
  const uint32_t head = b.tensor("head", {1, 5, 1, 1}, f16);
  ConvParams fc;
  fc.weights = b.constant(f16, {5, 4, 2, 30}, b.random_half(5 * 4 * 60));
  SdpStep clip = step(SdpKind::kClip);
  clip.lo = -3.f, clip.hi = 3.f;
  fc.post.steps = {step_f(SdpKind::kBias, {0.1f, 0.2f, 0.3f, 0.4f, 0.5f}), clip, step(SdpKind::kTanh)};
  b.op("fc", {lrn}, head, fc);
  const uint32_t sm = b.tensor("probs", {1, 5, 1, 1}, f16);
  b.op("softmax", {head}, sm, SoftmaxParams{1});
  b.output(sm, TensorFormat::kChw16);
  b.output(rd, TensorFormat::kChw32);
  b.m.build_info.precisions = "int8,fp16";
  return b.m;
}

}  // namespace softdla::testing
