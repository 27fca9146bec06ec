#include "model_checks.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "error.h"
#include "io_layout.h"
#include "memory_plan.h"

namespace softdla {

const char* to_string(SdpKind k) {
  static const char* const names[] = {"bias", "scale", "prelu", "relu", "clip", "add", "sub",
                                      "mul", "max", "min", "sigmoid", "tanh", "div"};
  return names[int(k)];
}

const char* op_kind_name(const OpParams& p) {
  static const char* const names[] = {"conv", "deconv", "sdp", "pool", "lrn", "resize", "concat",
                                      "slice", "shuffle", "softmax", "unary", "reduce_max",
                                      "convert"};
  return names[p.index()];
}

namespace {

constexpr uint32_t kMaxDim = 8192;      // C, H, W (docs/DLA-LIMITS.md)
constexpr uint32_t kMaxBatch = 4096;
constexpr uint64_t kMaxTensorBytes = 1ull << 30;  // intermediate limit per DLA subgraph: 1 GiB
constexpr uint8_t kMaxShift = 62;
constexpr uint8_t kMaxDivShift = 30;  // num::divide32 keeps (v << s) in int64 below this

std::string shape_str(const Shape& s) {
  return std::to_string(s[0]) + "x" + std::to_string(s[1]) + "x" + std::to_string(s[2]) + "x" +
         std::to_string(s[3]);
}

bool is_float(DataType t) { return t == DataType::kFloat32 || t == DataType::kFloat16; }

void check_range(const std::string& what, uint64_t v, uint64_t lo, uint64_t hi) {
  if (v < lo || v > hi) fail(what, " = ", v, " is outside the DLA range [", lo, ", ", hi, "]");
}

// A deconvolution's kernel or stride: 1-32 on each axis; on Orin (TensorRT 10.7's DLA rules) also 64, 96 or
// 128 on one axis with 1 on the other (1 x 64, 96 x 1; not 64 x 64). Xavier's TensorRT (8.x) has no such rule.
void check_deconv_extent(const std::string& what, uint64_t h, uint64_t w, Target target) {
  const auto long_side = [](uint64_t v) { return v == 64 || v == 96 || v == 128; };
  if (target != Target::kXavier && ((h == 1 && long_side(w)) || (w == 1 && long_side(h)))) return;
  if (h >= 1 && h <= 32 && w >= 1 && w <= 32) return;
  if (target == Target::kXavier) fail(what, " ", h, " x ", w, " is outside Xavier's DLA range: 1-32 on each axis");
  fail(what, " ", h, " x ", w, " is outside the DLA's: 1-32 on each axis, or 64, 96 or 128 on one axis with 1 on the other");
}

struct OpChecker {
  const Model& m;
  const Op& op;
  std::string where;

  const Tensor& in(size_t i) const { return m.tensors[op.inputs[i]]; }
  const Tensor& out() const { return m.tensors[op.outputs[0]]; }
  [[noreturn]] void bad(const std::string& msg) const { fail(where, ": ", msg); }

  void expect_inputs(size_t n) const {
    if (op.inputs.size() != n)
      bad("takes " + std::to_string(n) + " input(s), has " + std::to_string(op.inputs.size()));
  }
  void same_dtype_as_output(size_t i) const {
    if (in(i).dtype != out().dtype)
      bad(std::string("input '") + in(i).name + "' is " + to_string(in(i).dtype) + " but output is " +
          to_string(out().dtype) + " (insert a Convert op to change precision)");
  }
  void same_scale(size_t i) const {
    if (out().dtype == DataType::kInt8 && in(i).scale != out().scale)
      bad("INT8 input '" + in(i).name + "' and output must share one scale (the DLA forces equal "
          "dynamic ranges here)");
  }
  void float_only(const char* why) const {
    if (!is_float(out().dtype)) bad(std::string("runs in FP16/FP32 only: ") + why);
  }
  const Constant& weights(uint32_t idx, size_t rank) const {
    if (idx >= m.constants.size()) bad("weights constant index out of range");
    const Constant& c = m.constants[idx];
    if (c.dims.size() != rank) bad("weights must have " + std::to_string(rank) + " dims");
    const DataType want = out().dtype == DataType::kInt8 ? DataType::kInt8 : out().dtype;
    if (c.dtype != want)
      bad(std::string("weights are ") + to_string(c.dtype) + ", expected " + to_string(want));
    return c;
  }

  void check_values(const std::string& what, size_t n, uint32_t channels) const {
    if (n != 1 && n != channels)
      bad(what + " has " + std::to_string(n) + " values; expected 1 or " + std::to_string(channels));
  }

  void check_sdp(const SdpParams& p, uint32_t channels, size_t first_operand_input) const {
    const bool int8 = out().dtype == DataType::kInt8;
    std::set<uint32_t> operand_inputs(op.inputs.begin() + long(first_operand_input), op.inputs.end());
    std::set<uint32_t> used;
    for (size_t i = 0; i < p.steps.size(); ++i) {
      const SdpStep& s = p.steps[i];
      const std::string sw = std::string("SDP step ") + std::to_string(i) + " (" + to_string(s.kind) + ")";
      const bool needs_values = s.kind == SdpKind::kBias || s.kind == SdpKind::kScale || s.kind == SdpKind::kPRelu;
      if (needs_values) {
        check_values(sw, int8 ? s.ivalues.size() : s.fvalues.size(), channels);
        if (int8 && !s.fvalues.empty()) bad(sw + ": INT8 steps take integer operands");
        if (!int8 && !s.ivalues.empty()) bad(sw + ": float steps take float operands");
      } else if (!s.fvalues.empty() || !s.ivalues.empty()) {
        // Kernels index every step's values by channel: values on a step that takes none are corrupt.
        bad(sw + ": this step kind takes no per-channel values");
      }
      if (s.shift > kMaxShift || s.tensor_shift > kMaxShift) bad(sw + ": shift above 62");
      if (int8 && s.kind == SdpKind::kEltDiv && s.shift > kMaxDivShift) bad(sw + ": INT8 division shift above 30");
      if (s.kind == SdpKind::kClip && (int8 ? s.lo_i > s.hi_i : !(s.lo <= s.hi)))
        bad(sw + ": clip lower bound above upper bound");
      if ((s.kind == SdpKind::kSigmoid || s.kind == SdpKind::kTanh) && int8)
        bad(sw + ": INT8 sigmoid/tanh use the activation LUT after the output converter");
      if (is_eltwise(s.kind)) {
        if (s.tensor < 0 || !operand_inputs.count(uint32_t(s.tensor)))
          bad(sw + ": second tensor must be one of the op's inputs");
        used.insert(uint32_t(s.tensor));
        const Tensor& e = m.tensors[uint32_t(s.tensor)];
        if (e.dtype != out().dtype)
          bad(sw + ": operand '" + e.name + "' must have the op's precision " + to_string(out().dtype));
        const Shape& o = out().shape;
        const bool ok = (e.shape[0] == o[0] || e.shape[0] == 1) &&
                        (e.shape[1] == o[1] || e.shape[1] == 1) &&
                        ((e.shape[2] == o[2] && e.shape[3] == o[3]) || (e.shape[2] == 1 && e.shape[3] == 1));
        if (!ok)
          bad(sw + ": operand shape " + shape_str(e.shape) + " does not broadcast to " + shape_str(o) +
              " (DLA forms: NCHW, NC11, N111)");
      } else if (s.tensor != -1) {
        bad(sw + ": only element-wise steps take a second tensor");
      }
    }
    if (used != operand_inputs) bad("inputs after the first must each be used by an element-wise step");
    if (int8) {
      const Requant& r = p.requant;
      if (r.multiplier.empty()) bad("INT8 op needs an output converter (requant)");
      check_values("requant multiplier", r.multiplier.size(), channels);
      if (r.shift.size() != r.multiplier.size()) bad("requant shift and multiplier differ in length");
      for (uint8_t s : r.shift)
        if (s > kMaxShift) bad("requant shift above 62");
      if (p.lut != ActivationLut::kNone && !(std::isfinite(p.lut_input_scale) && p.lut_input_scale > 0))
        bad("activation LUT input scale must be a positive finite number");
    } else {
      if (!p.requant.multiplier.empty() || !p.requant.shift.empty())
        bad("float ops have no output converter");
      if (p.lut != ActivationLut::kNone) bad("activation LUT is for INT8 only (use a sigmoid/tanh step)");
    }
  }
};

// The padding rule compares with the kernel's own size, not its dilated span: say so where a dilation makes
// the padding look reasonable (DeepLab's ASPP branches pad by their dilation).
std::string undilated_note(uint32_t dilation) {
  return dilation > 1 ? " (the kernel's own size: the DLA rule ignores the dilation of " + std::to_string(dilation) + ")"
                      : std::string();
}

Shape conv_output(const OpChecker& k, const ConvParams& p) {
  const Shape& x = k.in(0).shape;
  const Constant& w = k.weights(p.weights, 4);
  const uint32_t K = w.dims[0], R = w.dims[2], S = w.dims[3];
  check_range(k.where + ": kernel height", R, 1, 32);
  check_range(k.where + ": kernel width", S, 1, 32);
  check_range(k.where + ": stride height", p.stride_h, 1, 8);
  check_range(k.where + ": stride width", p.stride_w, 1, 8);
  check_range(k.where + ": dilation height", p.dilation_h, 1, 32);
  check_range(k.where + ": dilation width", p.dilation_w, 1, 32);
  check_range(k.where + ": output maps", K, 1, kMaxDim);
  check_range(k.where + ": groups", p.groups, 1, kMaxDim);
  for (uint32_t pad : {p.pad_top, p.pad_bottom}) {
    check_range(k.where + ": padding height", pad, 0, 31);
    if (pad >= R)
      k.bad("padding height " + std::to_string(pad) + " must be smaller than the kernel height " + std::to_string(R) +
            undilated_note(p.dilation_h));
  }
  for (uint32_t pad : {p.pad_left, p.pad_right}) {
    check_range(k.where + ": padding width", pad, 0, 31);
    if (pad >= S)
      k.bad("padding width " + std::to_string(pad) + " must be smaller than the kernel width " + std::to_string(S) +
            undilated_note(p.dilation_w));
  }
  if (x[1] % p.groups || K % p.groups)
    k.bad("channels (" + std::to_string(x[1]) + " in, " + std::to_string(K) + " out) must divide by groups");
  if (w.dims[1] != x[1] / p.groups) k.bad("weights have " + std::to_string(w.dims[1]) + " input channels, expected C/groups");
  const int64_t eff_r = int64_t(R - 1) * p.dilation_h + 1, eff_s = int64_t(S - 1) * p.dilation_w + 1;
  const int64_t h = int64_t(x[2]) + p.pad_top + p.pad_bottom - eff_r;
  const int64_t wd = int64_t(x[3]) + p.pad_left + p.pad_right - eff_s;
  if (h < 0 || wd < 0) k.bad("kernel (with dilation) is larger than the padded input");
  return {x[0], K, uint32_t(h / p.stride_h + 1), uint32_t(wd / p.stride_w + 1)};
}

Shape infer(const OpChecker& k) {
  const Op& op = k.op;
  return std::visit(
      [&](const auto& p) -> Shape {
        using P = std::decay_t<decltype(p)>;
        const Shape x = k.in(0).shape;
        if constexpr (std::is_same_v<P, ConvParams>) {
          return conv_output(k, p);
        } else if constexpr (std::is_same_v<P, DeconvParams>) {
          const Constant& w = k.weights(p.weights, 4);
          if (w.dims[0] != x[1]) k.bad("deconv weights must be [C_in, K, R, S] with C_in matching the input");
          check_deconv_extent(k.where + ": deconv kernel", w.dims[2], w.dims[3], k.m.target);
          check_deconv_extent(k.where + ": deconv stride", p.stride_h, p.stride_w, k.m.target);
          check_range(k.where + ": deconv output maps", w.dims[1], 1, kMaxDim);
          return {x[0], w.dims[1], (x[2] - 1) * p.stride_h + w.dims[2], (x[3] - 1) * p.stride_w + w.dims[3]};
        } else if constexpr (std::is_same_v<P, PoolParams>) {
          check_range(k.where + ": pool window height", p.kernel_h, 1, 8);
          check_range(k.where + ": pool window width", p.kernel_w, 1, 8);
          check_range(k.where + ": pool stride height", p.stride_h, 1, 16);
          check_range(k.where + ": pool stride width", p.stride_w, 1, 16);
          for (uint32_t pad : {p.pad_top, p.pad_bottom, p.pad_left, p.pad_right})
            check_range(k.where + ": pool padding", pad, 0, 7);
          if (p.exclude_padding && k.m.target == Target::kXavier)
            k.bad("Xavier average pooling counts padding (exclude_padding is Orin-only)");
          const int64_t h = int64_t(x[2]) + p.pad_top + p.pad_bottom - p.kernel_h;
          const int64_t w = int64_t(x[3]) + p.pad_left + p.pad_right - p.kernel_w;
          if (h < 0 || w < 0) k.bad("pool window is larger than the padded input");
          const Shape o{x[0], x[1], uint32_t(h / p.stride_h + 1), uint32_t(w / p.stride_w + 1)};
          // Every window must hold at least one real element (no window made only of padding).
          if (int64_t(o[2] - 1) * p.stride_h >= int64_t(x[2]) + p.pad_top ||
              int64_t(o[3] - 1) * p.stride_w >= int64_t(x[3]) + p.pad_left ||
              p.pad_top >= p.kernel_h || p.pad_left >= p.kernel_w)
            k.bad("a pooling window lies entirely in the padding; reduce the padding");
          return o;
        } else if constexpr (std::is_same_v<P, ResizeParams>) {
          const uint32_t hi = p.mode == ResizeMode::kNearest ? 32 : 4;
          check_range(k.where + ": resize height scale", p.scale_h, 1, hi);
          check_range(k.where + ": resize width scale", p.scale_w, 1, hi);
          return {x[0], x[1], x[2] * p.scale_h, x[3] * p.scale_w};
        } else if constexpr (std::is_same_v<P, ConcatParams>) {
          uint64_t c = 0;
          for (size_t i = 0; i < op.inputs.size(); ++i) {
            const Shape& s = k.in(i).shape;
            if (s[0] != x[0] || s[2] != x[2] || s[3] != x[3])
              k.bad("concat inputs must agree in N, H and W (the DLA concatenates along C only)");
            c += s[1];
          }
          if (c > kMaxDim) k.bad("concatenated channel count above 8192");
          return {x[0], uint32_t(c), x[2], x[3]};
        } else if constexpr (std::is_same_v<P, SliceParams>) {
          const Shape& o = k.out().shape;
          if (p.start[0] != 0 || o[0] != x[0]) k.bad("the DLA cannot slice the batch dimension");
          for (int i = 1; i < 4; ++i)
            if (uint64_t(p.start[i]) + o[i] > x[i]) k.bad("slice window exceeds the input");
          return o;
        } else if constexpr (std::is_same_v<P, ShuffleParams>) {
          std::array<bool, 4> seen{};
          for (uint32_t a : p.perm) {
            if (a > 3 || seen[a]) k.bad("shuffle perm must be a permutation of 0..3");
            seen[a] = true;
          }
          const Shape& o = k.out().shape;
          if (p.perm[0] != 0 || o[0] != x[0]) k.bad("the batch dimension cannot take part in a shuffle");
          if (element_count(o) != element_count(x)) k.bad("reshape changes the element count");
          return o;
        } else if constexpr (std::is_same_v<P, SoftmaxParams>) {
          if (k.m.target == Target::kXavier) k.bad("softmax runs on Orin's DLA only, not Xavier's");
          if (p.axis < 1 || p.axis > 3) k.bad("softmax axis must be C (1), H (2) or W (3)");
          uint64_t others = 1;
          for (uint32_t a = 1; a < 4; ++a) if (a != p.axis) others *= x[a];
          check_range(k.where + ": softmax axis size", x[p.axis], 1, others == 1 ? 8192 : 1024);
          return x;
        } else if constexpr (std::is_same_v<P, ReduceMaxParams>) {
          Shape o = x;
          std::set<uint32_t> axes(p.axes.begin(), p.axes.end());
          if (axes.empty() || axes.size() != p.axes.size() || *axes.begin() < 1 || *axes.rbegin() > 3)
            k.bad("reduce axes must be distinct and among C (1), H (2), W (3)");
          for (uint32_t a : axes) o[a] = 1;
          return o;
        } else if constexpr (std::is_same_v<P, LrnParams>) {
          if (p.size != 3 && p.size != 5 && p.size != 7 && p.size != 9)
            k.bad("LRN window must be 3, 5, 7 or 9");
          if (!std::isfinite(p.alpha) || !std::isfinite(p.beta) || !std::isfinite(p.bias))
            k.bad("LRN parameters must be finite");
          return x;
        } else {  // SdpParams, UnaryParams, ConvertParams keep the shape
          return x;
        }
      },
      op.params);
}

void check_op_rules(const OpChecker& k) {
  const Op& op = k.op;
  const bool is_concat = std::holds_alternative<ConcatParams>(op.params);
  const bool has_sdp = std::holds_alternative<ConvParams>(op.params) ||
                       std::holds_alternative<DeconvParams>(op.params) ||
                       std::holds_alternative<SdpParams>(op.params);
  if (is_concat) {
    if (op.inputs.size() < 2) k.bad("concat needs at least 2 inputs");
  } else if (!has_sdp) {
    k.expect_inputs(1);
  }
  if (!std::holds_alternative<ConvertParams>(op.params)) {
    const size_t data_inputs = has_sdp ? 1 : op.inputs.size();
    for (size_t i = 0; i < data_inputs; ++i) k.same_dtype_as_output(i);
  } else if (k.in(0).dtype == k.out().dtype && k.in(0).scale == k.out().scale) {
    k.bad("convert between identical types and scales does nothing");
  }
  std::visit(
      [&](const auto& p) {
        using P = std::decay_t<decltype(p)>;
        if constexpr (std::is_same_v<P, ConvParams> || std::is_same_v<P, DeconvParams>) {
          k.check_sdp(p.post, k.out().shape[1], 1);
        } else if constexpr (std::is_same_v<P, SdpParams>) {
          k.check_sdp(p, k.out().shape[1], 1);
        } else if constexpr (std::is_same_v<P, PoolParams> || std::is_same_v<P, ResizeParams> ||
                             std::is_same_v<P, SliceParams> || std::is_same_v<P, ShuffleParams> ||
                             std::is_same_v<P, UnaryParams> || std::is_same_v<P, ReduceMaxParams>) {
          k.same_scale(0);
        } else if constexpr (std::is_same_v<P, ConcatParams>) {
          for (size_t i = 0; i < op.inputs.size(); ++i) k.same_scale(i);
        } else if constexpr (std::is_same_v<P, LrnParams>) {
          k.float_only("the DLA promotes INT8 LRN to FP16; convert around it");
        } else if constexpr (std::is_same_v<P, SoftmaxParams>) {
          k.float_only("softmax runs in FP16 on the DLA; convert around it");
        }
      },
      op.params);
}

void check_tensor(const Model& m, size_t i) {
  const Tensor& t = m.tensors[i];
  const std::string w = "tensor " + std::to_string(i) + " '" + t.name + "'";
  check_tensor_extents(m, i);
  if (t.dtype == DataType::kInt32) fail(w, ": int32 is not a tensor type");
  if (element_count(t.shape) * element_size(t.dtype) > kMaxTensorBytes)
    fail(w, " is larger than 1 GiB (the DLA limit for one tensor)");
  if (t.dtype == DataType::kInt8 && !(std::isfinite(t.scale) && t.scale > 0))
    fail(w, ": INT8 scale must be a positive finite number");
  if (t.constant >= 0) {
    if (size_t(t.constant) >= m.constants.size()) fail(w, ": constant index out of range");
    const Constant& c = m.constants[size_t(t.constant)];
    uint64_t count = 1;
    for (uint32_t d : c.dims) count *= d;
    if (c.dtype != t.dtype || count != element_count(t.shape))
      fail(w, ": constant data does not match the tensor's type and shape");
  } else if (t.constant != -1) {
    fail(w, ": constant index must be -1 or a valid index");
  }
}

void check_constant(const Model& m, size_t i) {
  const Constant& c = m.constants[i];
  uint64_t count = 1;
  for (uint32_t d : c.dims) {
    if (d == 0 || d > (1u << 24)) fail("constant ", i, ": dimension ", d, " out of range");
    count *= d;
    if (count > (1ull << 32)) fail("constant ", i, ": too many elements");
  }
  if (c.dims.empty() || c.dims.size() > 4) fail("constant ", i, ": must have 1 to 4 dims");
  if (c.data.size() != count * element_size(c.dtype))
    fail("constant ", i, ": holds ", c.data.size(), " bytes; its dims and type need ",
         count * element_size(c.dtype));
}

void check_io(const Model& m, const IoBinding& io, const char* kind, std::vector<int>& bound) {
  if (io.tensor >= m.tensors.size()) fail(kind, " binding names tensor ", io.tensor, " of ", m.tensors.size());
  const Tensor& t = m.tensors[io.tensor];
  if (bound[io.tensor]++) fail("tensor '", t.name, "' is bound to more than one I/O slot");
  if (t.constant >= 0) fail(kind, " '", t.name, "' is a constant");
  const TensorDescriptor want = io_descriptor(t.name, t.shape, t.dtype, io.format, m.target);
  if (want.size > UINT32_MAX) fail(kind, " '", t.name, "' is larger than 4 GiB");
  if (!(io.desc == want))
    fail(kind, " '", t.name, "': stored tensor descriptor does not match its shape, type and format (stored ",
         io.desc.size, " bytes, row stride ", io.desc.stride[1], "; expected ", want.size, " bytes, row stride ",
         want.stride[1], "); a Xavier loadable whose dla_linear rows are 32 bytes came from an earlier softdla: "
         "rebuild it");
}

}  // namespace

void check_tensor_extents(const Model& m, size_t i) {
  const Tensor& t = m.tensors[i];
  const std::string w = "tensor " + std::to_string(i) + " '" + t.name + "'";
  check_range(w + " batch", t.shape[0], 1, kMaxBatch);
  for (int d = 1; d < 4; ++d) check_range(w + " dim " + std::to_string(d), t.shape[d], 1, kMaxDim);
}

std::vector<TensorLifetime> tensor_lifetimes(const Model& m) {
  std::vector<TensorLifetime> life(m.tensors.size());
  for (size_t i = 0; i < m.ops.size(); ++i) {
    for (uint32_t t : m.ops[i].inputs) life[t].last = int(i);
    for (uint32_t t : m.ops[i].outputs) {
      life[t].first = int(i);
      life[t].last = std::max(life[t].last, int(i));
    }
  }
  return life;
}

std::vector<bool> intermediate_mask(const Model& m) {
  std::vector<bool> inter(m.tensors.size(), true);
  for (const auto* list : {&m.inputs, &m.outputs})
    for (const IoBinding& io : *list) inter[io.tensor] = false;
  for (size_t i = 0; i < m.tensors.size(); ++i)
    if (m.tensors[i].constant >= 0) inter[i] = false;
  return inter;
}

Shape check_op(const Model& m, const Op& op) {
  OpChecker k{m, op, "op '" + op.name + "' (" + op_kind_name(op.params) + ")"};
  check_op_rules(k);
  return infer(k);
}

void check_graph(const Model& m) {
  for (size_t i = 0; i < m.constants.size(); ++i) check_constant(m, i);
  for (size_t i = 0; i < m.tensors.size(); ++i) check_tensor(m, i);
  if (m.inputs.empty() || m.outputs.empty()) fail("a loadable needs at least one input and one output");
  std::vector<int> bound(m.tensors.size(), 0);
  for (const IoBinding& io : m.inputs) check_io(m, io, "input", bound);
  for (const IoBinding& io : m.outputs) check_io(m, io, "output", bound);
  // Programs and the Python API look I/O tensors up by name: two bindings with one name would make one
  // of them unreachable (or, keyed in a dict, silently replaced by the other).
  std::set<std::string> io_names;
  for (const auto* list : {&m.inputs, &m.outputs})
    for (const IoBinding& io : *list)
      if (!io_names.insert(io.desc.name).second)
        fail("I/O tensor name '", io.desc.name, "' is used by more than one input/output binding; names must be "
             "unique");

  // Graph order: a tensor is available once it is an input, a constant, or produced by an earlier op.
  std::vector<bool> available(m.tensors.size(), false), produced(m.tensors.size(), false);
  for (const IoBinding& io : m.inputs) available[io.tensor] = true;
  for (size_t i = 0; i < m.tensors.size(); ++i)
    if (m.tensors[i].constant >= 0) available[i] = true;
  for (size_t i = 0; i < m.ops.size(); ++i) {
    const Op& op = m.ops[i];
    const std::string where = "op " + std::to_string(i) + " '" + op.name + "' (" + op_kind_name(op.params) + ")";
    if (op.inputs.empty()) fail(where, ": has no inputs");
    if (op.outputs.size() != 1) fail(where, ": must have exactly one output");
    for (uint32_t t : op.inputs) {
      if (t >= m.tensors.size()) fail(where, ": input tensor index ", t, " out of range");
      if (!available[t])
        fail(where, ": reads tensor '", m.tensors[t].name,
             "' before it is produced (ops must be in execution order and the graph acyclic)");
    }
    const uint32_t o = op.outputs[0];
    if (o >= m.tensors.size()) fail(where, ": output tensor index ", o, " out of range");
    if (available[o]) fail(where, ": output '", m.tensors[o].name, "' is already produced, an input or a constant");
    if (m.tensors[o].constant >= 0) fail(where, ": writes a constant");
    if (std::holds_alternative<ConvParams>(op.params) || std::holds_alternative<DeconvParams>(op.params) ||
        std::holds_alternative<SdpParams>(op.params))
      if (m.tensors[op.inputs[0]].constant >= 0) fail(where, ": data input must not be a constant");
    OpChecker k{m, op, where};
    check_op_rules(k);
    const Shape want = infer(k);
    if (want != m.tensors[o].shape)
      fail(where, ": output '", m.tensors[o].name, "' has shape ", shape_str(m.tensors[o].shape),
           " but the op produces ", shape_str(want));
    available[o] = produced[o] = true;
  }
  for (const IoBinding& io : m.outputs)
    if (!produced[io.tensor]) fail("output '", m.tensors[io.tensor].name, "' is not produced by any op");
  for (const IoBinding& io : m.inputs)
    if (produced[io.tensor]) fail("input '", m.tensors[io.tensor].name, "' is overwritten by an op");
}

void check_memory_plan(const Model& m) {
  // Memory plan: every intermediate inside the arena, aligned, and never sharing bytes with another
  // intermediate that is alive at the same time.
  const MemoryPlan& plan = m.memory_plan;
  if (plan.offsets.size() != m.tensors.size())
    fail("memory plan has ", plan.offsets.size(), " offsets for ", m.tensors.size(), " tensors");
  if (plan.arena_size > (4ull << 30)) fail("memory plan arena above 4 GiB");
  const std::vector<bool> inter = intermediate_mask(m);
  const std::vector<TensorLifetime> life = tensor_lifetimes(m);
  struct Block { uint64_t begin, end; int first, last; };
  std::vector<Block> blocks;
  for (size_t t = 0; t < m.tensors.size(); ++t) {
    if (!inter[t] || life[t].first < 0) continue;
    const uint64_t bytes = element_count(m.tensors[t].shape) * element_size(m.tensors[t].dtype);
    const uint64_t off = plan.offsets[t];
    if (off % kArenaAlignment || off > plan.arena_size || bytes > plan.arena_size - off)
      fail("memory plan places tensor '", m.tensors[t].name, "' outside the arena or unaligned");
    blocks.push_back({off, off + bytes, life[t].first, life[t].last});
  }
  // The arena is exactly what its blocks need: the engine allocates arena_size bytes, so a small file
  // must not be able to ask for gigabytes it never uses.
  uint64_t needed = 0;
  for (const Block& b : blocks) needed = std::max(needed, b.end);
  if (plan.arena_size > (needed + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment)
    fail("memory plan arena is ", plan.arena_size, " bytes but its tensors need ", needed,
         "; the loadable is corrupt, rebuild it");
  std::sort(blocks.begin(), blocks.end(), [](const Block& a, const Block& b) { return a.begin < b.begin; });
  for (size_t i = 0; i < blocks.size(); ++i)
    for (size_t j = i + 1; j < blocks.size() && blocks[j].begin < blocks[i].end; ++j)
      if (blocks[i].first <= blocks[j].last && blocks[j].first <= blocks[i].last)
        fail("memory plan overlaps two tensors that are alive at the same time");
}

void check_model(const Model& m) {
  check_graph(m);
  check_memory_plan(m);
}

}  // namespace softdla
