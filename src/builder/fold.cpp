// Shape inference and constant folding. Every node gets static output shapes; a node whose inputs are
// all constant and whose op is pure data/shape arithmetic is evaluated and removed.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <span>

#include "error.h"
#include "ir.h"
#include "op_rules.h"

namespace softdla::builder {
namespace {

using Dims = std::vector<int64_t>;

[[noreturn]] void bad(const Node& n, const std::string& msg) { fail("node '", n.label(), "' (", n.op, "): ", msg); }

int64_t norm_axis(const Node& n, int64_t axis, size_t rank) {
  const int64_t r = int64_t(rank);
  if (axis < -r || axis >= r) bad(n, "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(r));
  return axis < 0 ? axis + r : axis;
}

// Kernel, stride and dilation of at least 1, padding of at least 0, all of sane size (a corrupt or
// hostile model must not divide by zero or overflow).
void check_geometry(const Node& n, const Dims& k, const Dims& s, const Dims& d, const Dims& p) {
  for (int64_t v : k)
    if (v < 1 || v > 4096) bad(n, "kernel size must be between 1 and 4096");
  for (int64_t v : s)
    if (v < 1 || v > 4096) bad(n, "strides must be between 1 and 4096");
  for (int64_t v : d)
    if (v < 1 || v > 4096) bad(n, "dilations must be between 1 and 4096");
  for (int64_t v : p)
    if (v < 0 || v > 4096) bad(n, "pads must be between 0 and 4096");
}

Dims broadcast(const Node& n, const Dims& a, const Dims& b) {
  Dims out(std::max(a.size(), b.size()), 1);
  for (size_t k = 0; k < out.size(); ++k) {
    const int64_t da = k < out.size() - a.size() ? 1 : a[k - (out.size() - a.size())];
    const int64_t db = k < out.size() - b.size() ? 1 : b[k - (out.size() - b.size())];
    if (da != db && da != 1 && db != 1) bad(n, "shapes do not broadcast");
    out[k] = std::max(da, db);
  }
  return out;
}

// Strides of a row-major shape.
Dims strides_of(const Dims& d) {
  Dims s(d.size(), 1);
  for (int k = int(d.size()) - 2; k >= 0; --k) s[size_t(k)] = s[size_t(k) + 1] * d[size_t(k) + 1];
  return s;
}

// Element index in a broadcast operand for the flat index of the output.
size_t bcast_index(size_t flat, const Dims& out, const Dims& in) {
  const Dims os = strides_of(out), is = strides_of(in);
  size_t idx = 0;
  const size_t off = out.size() - in.size();
  for (size_t k = 0; k < out.size(); ++k) {
    const int64_t coord = int64_t(flat) / os[k] % out[k];
    if (k >= off && in[k - off] != 1) idx += size_t(coord * is[k - off]);
  }
  return idx;
}

class Folder {
 public:
  Folder(Graph& g, std::vector<NodeIssue>* issues) : g_(g), issues_(issues) {}

  void run() {
    for (Node& n : g_.nodes) {
      if (n.removed) continue;
      std::string problem;  // why the node cannot be built; its shapes may still be inferred
      try {
        for (const std::string& in : n.inputs)
          if (!in.empty() && !g_.value(in).known_shape)
            bad(n, "depends on '" + in + "', whose shape is unknown because an earlier node is unsupported");
        // A malformed node is never inferred: inference would read the very attributes and inputs
        // that are wrong (check goes on with the shapes the model declares, below). A well-formed node
        // the DLA cannot run still is, so that check can judge the nodes after it.
        check_well_formed(n, g_);
        try {
          validate_node(n, g_);
        } catch (const Error& e) {
          if (!issues_) throw;
          problem = e.what();
        }
        infer(n);
      } catch (const Error& e) {
        if (!issues_) throw;
        if (problem.empty()) problem = e.what();
        // `check` goes on past an unsupported node with the shapes the model itself declares.
        if (!declared_shapes(n)) {
          issues_->push_back({n.name, n.op, problem});
          n.unsupported = true;
          continue;
        }
      }
      for (const std::string& o : n.outputs)
        if (!o.empty()) g_.value(o).known_shape = true;
      try {
        compare_with_declared(n);
      } catch (const Error& e) {
        if (!issues_) throw;
        if (problem.empty()) problem = e.what();
      }
      if (!problem.empty()) {
        issues_->push_back({n.name, n.op, problem});
        n.unsupported = true;
        continue;
      }
      const bool outputs_const = std::all_of(n.outputs.begin(), n.outputs.end(), [&](const std::string& o) {
        return o.empty() || g_.is_const(o);
      });
      // A folding op over constants whose value this builder does not compute would vanish with its
      // output unset, and the error would name the next node: say so here, at the node.
      if (n.op != "Constant" && all_const(n) && foldable(n.op) && !n.outputs.empty() && !g_.is_const(n.outputs[0])) {
        const std::string msg = "its inputs are constants, but the builder does not fold this form of " + n.op +
                                "; compute the constant outside the model (onnx-simplifier, or onnxruntime's "
                                "constant folding) and give it as an initializer";
        if (!issues_) bad(n, msg);
        issues_->push_back({n.name, n.op, msg});
        n.unsupported = true;
        continue;
      }
      if (n.op == "Constant" || (all_const(n) && foldable(n.op)) || outputs_const) n.removed = true;
    }
  }

 private:
  Graph& g_;
  std::vector<NodeIssue>* issues_;

  const Value& in(const Node& n, size_t k) {
    if (k >= n.inputs.size() || n.inputs[k].empty()) bad(n, "missing input " + std::to_string(k));
    return g_.value(n.inputs[k]);
  }
  bool has_in(const Node& n, size_t k) { return k < n.inputs.size() && !n.inputs[k].empty(); }
  Value& out(const Node& n, size_t k = 0) { return g_.value(n.outputs.at(k)); }
  // The shapes the model declares for every output of `n` (value_info, graph outputs), if it declares all.
  static void checked_size(const Node& n, const Dims& dims) {
    try {
      check_tensor_size("its output", dims);
    } catch (const Error& e) {
      bad(n, e.what());
    }
  }
  bool declared_shapes(const Node& n) {
    for (const std::string& o : n.outputs)
      if (!o.empty() && !g_.declared.count(o)) return false;
    for (const std::string& o : n.outputs)
      if (!o.empty()) g_.value(o).dims = g_.declared.at(o);
    return true;
  }
  // An inferred shape that differs from the one the model declares means the builder would compute
  // something else than the exporter did: never build on it.
  void compare_with_declared(const Node& n) {
    for (const std::string& o : n.outputs) {
      const auto it = g_.declared.find(o);
      if (o.empty() || it == g_.declared.end() || it->second == g_.value(o).dims) continue;
      bad(n, "output '" + o + "' comes out as " + dims_text(g_.value(o).dims) + " here but the model declares " +
                 dims_text(it->second) +
                 (g_.shapes_fixed
                      ? "; --shapes set the inputs' dynamic dimensions, and the model's value_info still declares this "
                        "value at another size (as exported, or simplified at a fixed size): remove the stale "
                        "value_info entries (del model.graph.value_info[:]) or re-export with the axis dynamic"
                      : "; the builder does not implement this node as the exporter did"));
    }
  }
  bool all_const(const Node& n) {
    return std::all_of(n.inputs.begin(), n.inputs.end(), [&](const std::string& s) { return s.empty() || g_.is_const(s); });
  }
  static bool foldable(const std::string& op) {
    static const char* const ops[] = {"Shape", "Gather", "Cast", "Unsqueeze", "Squeeze", "Concat", "Reshape",
                                      "Slice", "Add", "Sub", "Mul", "Div", "Transpose", "Flatten", "Identity",
                                      "ConstantOfShape", "Range", "Floor", "Ceil", "Sqrt", "Neg", "Reciprocal",
                                      "Pow", "ReduceProd", "Min", "Max", "Equal", "Where", "Expand", "Dropout",
                                      "DequantizeLinear", "QuantizeLinear"};
    return std::find(std::begin(ops), std::end(ops), op) != std::end(ops);
  }
  std::vector<int64_t> ints_of(const Node& n, size_t k) {
    const Value& v = in(n, k);
    if (!v.constant) bad(n, "input '" + v.name + "' must be a constant (computed from shapes or initializers)");
    std::vector<int64_t> r;
    for (size_t i = 0; i < v.constant->size(); ++i) r.push_back(v.constant->int_at(i));
    return r;
  }
  void set(const Node& n, Dims dims, size_t k = 0) {
    for (int64_t d : dims)
      if (d < 0) bad(n, "computed a negative dimension");
    checked_size(n, dims);
    out(n, k).dims = std::move(dims);
  }
  void set_const(const Node& n, Dims dims, ConstData c, int32_t elem, size_t k = 0) {
    checked_size(n, dims);
    Value& v = out(n, k);
    v.dims = std::move(dims);
    v.constant = std::move(c);
    v.elem_type = elem;
  }

  void infer(Node& n);
  void infer_constant(Node& n);
  void infer_quantize(Node& n);
  int64_t quant_axis(const Node& n, const Value& x, const Value& scale);
  void infer_shape(Node& n);
  void infer_gather(Node& n);
  void infer_cast(Node& n);
  void infer_constant_of_shape(Node& n);
  void infer_concat(Node& n);
  void infer_transpose(Node& n);
  void infer_range(Node& n);
  void infer_gemm(Node& n);
  void infer_matmul(Node& n);
  void infer_dequantize(Node& n);
  void check_symmetric_codes(const Node& n);
  void infer_same_shape(Node& n);
  void infer_reduce(Node& n);
  void infer_split(Node& n);
  void infer_expand(Node& n);
  void infer_unsupported(Node& n);
  void infer_conv_node(Node& n) { infer_conv(n, false); }
  void infer_deconv_node(Node& n) { infer_conv(n, true); }
  void infer_elementwise(Node& n);
  void infer_conv(Node& n, bool transpose);
  void infer_pool(Node& n);
  Dims as_2d(Node& n, const Dims& x);
  void infer_reshape_like(Node& n);
  void infer_resize(Node& n);
  void infer_slice(Node& n);
  void infer_pad(Node& n);
};

void Folder::infer_elementwise(Node& n) {
  Dims d = in(n, 0).dims;
  for (size_t k = 1; k < n.inputs.size(); ++k)
    if (has_in(n, k)) d = broadcast(n, d, in(n, k).dims);
  const bool unary = n.inputs.size() == 1;
  out(n).elem_type = in(n, unary ? 0 : n.inputs.size() - 1).elem_type;
  if (n.op == "Where") out(n).elem_type = in(n, 1).elem_type;
  if (n.op == "Equal") out(n).elem_type = 9;
  if (!all_const(n) || !foldable(n.op)) return set(n, d);
  const size_t count = size_t(checked_product<int64_t>(d, "a shape"));
  ConstData c;
  const Value& a = in(n, 0);
  const bool int_math = !a.constant->is_float && (unary || !in(n, n.inputs.size() - 1).constant->is_float);
  c.is_float = !int_math;
  for (size_t i = 0; i < count; ++i) {
    auto arg = [&](size_t k) { const Value& v = in(n, k); return v.constant->at(bcast_index(i, d, v.dims)); };
    const double x = arg(0);
    double r = x;
    if (n.op == "Add") r = x + arg(1);
    else if (n.op == "Sub") r = x - arg(1);
    else if (n.op == "Mul") r = x * arg(1);
    else if (n.op == "Div" && int_math) {
      const double y = arg(1);
      if (y == 0) bad(n, "integer division by zero while folding constants");
      r = std::trunc(x / y);  // integer division truncates toward zero, also for negative divisors
    } else if (n.op == "Div") r = x / arg(1);
    else if (n.op == "Min") r = std::min(x, arg(1));
    else if (n.op == "Max") r = std::max(x, arg(1));
    else if (n.op == "Pow") r = std::pow(x, arg(1));
    else if (n.op == "Equal") r = x == arg(1);
    else if (n.op == "Where") r = x != 0 ? arg(1) : arg(2);
    else if (n.op == "Floor") r = std::floor(x);
    else if (n.op == "Ceil") r = std::ceil(x);
    else if (n.op == "Sqrt") r = std::sqrt(x);
    else if (n.op == "Neg") r = -x;
    else if (n.op == "Reciprocal") r = 1 / x;
    if (c.is_float) c.f.push_back(r);
    else c.i.push_back(checked_int<int64_t>(r, "node '" + n.label() + "' (" + n.op + "): an integer result"));
  }
  set_const(n, d, std::move(c), out(n).elem_type);
}

// One message for a convolution kernel or pooling window that does not fit even once in its padded input.
[[noreturn]] static void window_past_input(const Node& n, const char* what, int64_t size, int64_t input, int64_t pads) {
  bad(n, std::string("the ") + what + " spans " + std::to_string(size) + " positions, more than its input (" +
             std::to_string(input) + ") with its padding (" + std::to_string(pads) + "): no output position");
}

// A 1-D convolution or pooling ([N, C, T] tensors) as a 2-D one over [N, C, 1, T], where rank-3 tensors lie
// on the DLA (TensorRT's ONNX parser unsqueezes T into H instead, k x 1: the same numbers, and the DLA's
// limits are the same on both axes). The node's spatial attributes gain a leading H entry (kernel 1, stride 1, dilation 1,
// pads 0, output_padding 0, output_shape 1), in place, as auto_pad is resolved in place, so every later
// stage sees a 2-D node; rank-3 tensors already lie on the DLA as [N, C, 1, W], and 1-D weights
// [K, C/group, k] have the bytes of [K, C/group, 1, k]. Returns x as the 2-D form reads it.
Dims Folder::as_2d(Node& n, const Dims& x) {
  if (x.size() != 3) return x;
  auto widen = [&](const char* name, int64_t h) {
    if (!n.has(name)) return;
    std::vector<int64_t>& v = n.attrs[name].ints;
    if (std::string(name) == "pads") {
      if (v.size() != 2) bad(n, "a 1-D node's pads take 2 values (begin, end), not " + std::to_string(v.size()));
      v = {0, v[0], 0, v[1]};
    } else {
      if (v.size() != 1) bad(n, std::string("a 1-D node's ") + name + " takes 1 value, not " + std::to_string(v.size()));
      v.insert(v.begin(), h);
    }
  };
  widen("kernel_shape", 1), widen("strides", 1), widen("dilations", 1), widen("pads", 0);
  widen("output_padding", 0), widen("output_shape", 1);
  return {x[0], x[1], 1, x[2]};
}

void Folder::infer_conv(Node& n, bool transpose) {
  const bool one_d = in(n, 0).dims.size() == 3;
  if (one_d && in(n, 1).dims.size() != 3) bad(n, "a 1-D convolution takes 3-D weights [K, C/group, k]");
  const Dims x = as_2d(n, in(n, 0).dims);
  const Dims w = conv_weight_dims(in(n, 1).dims);  // a view: other readers of the weights keep their shape
  if (x.size() != 4 || w.size() != 4) bad(n, "only 1-D and 2-D convolution (3-D and 4-D tensors) runs on the DLA");
  const int64_t groups = n.get_int("group", 1);
  Dims k = n.get_ints("kernel_shape", {w[2], w[3]});
  Dims s = n.get_ints("strides", {1, 1}), d = n.get_ints("dilations", {1, 1});
  Dims p = n.get_ints("pads", {0, 0, 0, 0});
  if (k.size() != 2 || s.size() != 2 || d.size() != 2 || p.size() != 4) bad(n, "expects 2-D kernel, strides, dilations and 4 pads");
  check_geometry(n, k, s, d, p);
  if (groups < 1 || groups > 65536) bad(n, "group must be at least 1");
  for (int64_t v : w)
    if (v < 1) bad(n, "weights have an empty dimension");
  if (!transpose && (k[0] != w[2] || k[1] != w[3])) bad(n, "kernel_shape differs from the weights");
  const std::string autopad = n.get_string("auto_pad", "NOTSET");
  Dims o(4);
  o[0] = x[0];
  if (!transpose) {
    o[1] = w[0];
    for (int a = 0; a < 2; ++a) {
      const int64_t eff = (k[size_t(a)] - 1) * d[size_t(a)] + 1;
      if (autopad == "SAME_UPPER" || autopad == "SAME_LOWER") {
        o[size_t(2 + a)] = (x[size_t(2 + a)] + s[size_t(a)] - 1) / s[size_t(a)];
        const int64_t total = (o[size_t(2 + a)] - 1) * s[size_t(a)] + eff - x[size_t(2 + a)];
        // A stride beyond the (dilated) kernel can ask for negative padding: ONNX Runtime shifts the
        // windows, ONNX's reference takes 0. No one answer, as for the pools: an error.
        if (total < 0)
          bad(n, "auto_pad=" + autopad + " asks for negative padding here (a kernel of " + std::to_string(eff) +
                     " with a stride of " + std::to_string(s[size_t(a)]) + " over " + std::to_string(x[size_t(2 + a)]) +
                     "), which ONNX implementations treat differently; give explicit pads instead");
        const int64_t small = total / 2, large = total - small;
        p[size_t(a)] = autopad == "SAME_UPPER" ? small : large;
        p[size_t(a + 2)] = autopad == "SAME_UPPER" ? large : small;
      } else if (autopad == "VALID") {
        p = {0, 0, 0, 0};
      }
      if (autopad != "SAME_UPPER" && autopad != "SAME_LOWER") {
        const int64_t padded = x[size_t(2 + a)] + p[size_t(a)] + p[size_t(a + 2)];
        if (padded < eff) window_past_input(n, "kernel", eff, x[size_t(2 + a)], p[size_t(a)] + p[size_t(a + 2)]);
        o[size_t(2 + a)] = (padded - eff) / s[size_t(a)] + 1;
      }
    }
    if (x[1] != w[1] * groups)
      bad(n, "input has " + std::to_string(x[1]) + " channels, but the weights take " + std::to_string(w[1]) + " x " +
                 std::to_string(groups) + (groups == 1 ? " group" : " groups") +
                 ": input channels do not match weights x groups (check the input's shape, or --shapes)");
  } else {
    o[1] = w[1] * groups;
    const Dims op = n.get_ints("output_padding", {0, 0});
    Dims shape = n.get_ints("output_shape");
    if (shape.size() == 4) shape.erase(shape.begin(), shape.begin() + 2);
    if (op.size() != 2 || (!shape.empty() && shape.size() != 2)) bad(n, "expects 2 output_padding and output_shape values");
    const bool same = autopad == "SAME_UPPER" || autopad == "SAME_LOWER";
    for (size_t a = 0; a < 2; ++a) {
      if (op[a] < 0 || op[a] >= std::max(s[a], d[a])) bad(n, "output_padding must be smaller than the stride or dilation");
      const int64_t full = (x[2 + a] - 1) * s[a] + (k[a] - 1) * d[a] + 1 + op[a];  // output before padding
      if (!shape.empty() || same) {
        // ONNX: the requested (or SAME: input x stride) size decides the padding, split as auto_pad says.
        const int64_t want = shape.empty() ? x[2 + a] * s[a] : shape[a];
        const int64_t total = full - want;
        if (total < 0)
          bad(n, shape.empty() ? "auto_pad=" + autopad + " asks for input x stride = " + std::to_string(want) +
                                     " outputs, more than the deconvolution can produce (" + std::to_string(full) +
                                     "): it would need negative padding; give explicit pads instead"
                               : "output_shape is larger than the deconvolution can produce");
        const int64_t small = total / 2, large = total - small;
        p[a] = autopad == "SAME_UPPER" ? small : large;
        p[a + 2] = autopad == "SAME_UPPER" ? large : small;
      } else if (autopad == "VALID") {
        p[a] = p[a + 2] = 0;
      }
      o[2 + a] = full - p[a] - p[a + 2];
      if (o[2 + a] < 1) bad(n, "padding leaves no output");
    }
  }
  n.attrs["pads"].kind = Attribute::kInts;
  n.attrs["pads"].ints = p;  // resolved auto_pad
  out(n).elem_type = 1;
  set(n, one_d ? Dims{o[0], o[1], o[3]} : o);  // back to [N, C, T]
}

void Folder::infer_pool(Node& n) {
  const bool one_d = in(n, 0).dims.size() == 3;
  const Dims x = as_2d(n, in(n, 0).dims);
  if (x.size() != 4) bad(n, "only 1-D and 2-D pooling (3-D and 4-D tensors) runs on the DLA");
  if (n.op == "GlobalAveragePool" || n.op == "GlobalMaxPool") return set(n, one_d ? Dims{x[0], x[1], 1} : Dims{x[0], x[1], 1, 1});
  Dims k = n.get_ints("kernel_shape"), s = n.get_ints("strides", {1, 1}), p = n.get_ints("pads", {0, 0, 0, 0});
  Dims d = n.get_ints("dilations", {1, 1});
  if (k.size() != 2 || s.size() != 2 || p.size() != 4) bad(n, "expects a 2-D kernel, strides and 4 pads");
  if (d != Dims{1, 1}) bad(n, "dilated pooling is not supported on the DLA");
  check_geometry(n, k, s, d, p);
  const bool ceil = n.get_int("ceil_mode", 0) != 0;
  const std::string autopad = n.get_string("auto_pad", "NOTSET");
  Dims o{x[0], x[1], 0, 0}, overhang{0, 0};
  for (int a = 0; a < 2; ++a) {
    const size_t A = size_t(a);
    if (autopad == "SAME_UPPER" || autopad == "SAME_LOWER") {
      o[2 + A] = (x[2 + A] + s[A] - 1) / s[A];
      const int64_t total = (o[2 + A] - 1) * s[A] + k[A] - x[2 + A];
      // A window smaller than the stride can ask for negative padding: ONNX Runtime refuses it (or shifts
      // the windows), ONNX's reference refuses, TensorFlow takes 0. No one answer: an error.
      if (total < 0)
        bad(n, "auto_pad=" + autopad + " asks for negative padding here (a window of " + std::to_string(k[A]) +
                   " with a stride of " + std::to_string(s[A]) + " over " + std::to_string(x[2 + A]) +
                   "), which ONNX implementations treat differently; give explicit pads instead");
      p[A] = autopad == "SAME_UPPER" ? total / 2 : total - total / 2;
      p[A + 2] = total - p[A];
      continue;
    }
    if (autopad == "VALID") p[A] = p[A + 2] = 0;
    const int64_t span = x[2 + A] + p[A] + p[A + 2] - k[A];
    if (span < 0) window_past_input(n, "window", k[A], x[2 + A], p[A] + p[A + 2]);
    o[2 + A] = (ceil ? (span + s[A] - 1) / s[A] : span / s[A]) + 1;
    // ceil mode: the last window must start inside the input or left padding (ONNX rule)
    if (ceil && (o[2 + A] - 1) * s[A] >= x[2 + A] + p[A]) --o[2 + A];
    const int64_t reach = (o[2 + A] - 1) * s[A] + k[A] - x[2 + A] - p[A];  // the last window's end past the input
    if (ceil && reach > p[A + 2]) overhang[A] = reach - p[A + 2], p[A + 2] = reach;
  }
  n.attrs["pads"].kind = Attribute::kInts;
  n.attrs["pads"].ints = p;  // ceil mode and auto_pad resolved into explicit (maybe larger) padding
  // How much of that padding only ceil mode added (bottom, right): an average counts the model's padding
  // (count_include_pad) but never this.
  n.attrs["_ceil_overhang"] = Attribute{Attribute::kInts, 0, 0, {}, overhang, {}, {}};
  set(n, one_d ? Dims{o[0], o[1], o[3]} : o);  // back to [N, C, T]
}

void Folder::infer_reshape_like(Node& n) {
  const Value& x = in(n, 0);
  Dims d;
  if (n.op == "Reshape") {
    if (in(n, 1).dims.size() != 1)  // ONNX: a 1-D tensor; ONNX Runtime refuses any other
      bad(n, "the shape input must be a 1-D tensor, and it is " + dims_text(in(n, 1).dims));
    Dims shape = ints_of(n, 1);
    const bool allowzero = n.get_int("allowzero", 0) != 0;
    int64_t known = 1, infer_at = -1;
    for (size_t k = 0; k < shape.size(); ++k) {
      if (shape[k] == 0 && !allowzero) {
        if (k >= x.dims.size()) bad(n, "0 in shape refers to a missing input dimension");
        shape[k] = x.dims[k];
      }
      if (shape[k] < -1 || shape[k] > kMaxTensorElements)
        bad(n, "target shape value " + std::to_string(shape[k]) + " is out of range");
      if (shape[k] == -1) {
        if (infer_at >= 0) bad(n, "more than one -1 in the target shape");
        infer_at = int64_t(k);
      } else {
        known = checked_mul<int64_t>(known, shape[k], "the target shape");
      }
    }
    if (infer_at >= 0) {
      if (known == 0 || x.count() % known) bad(n, "cannot infer the -1 dimension");
      shape[size_t(infer_at)] = x.count() / known;
    }
    d = shape;
  } else if (n.op == "Flatten") {
    const int64_t axis = n.get_int("axis", 1);
    const int64_t a = axis < 0 ? axis + int64_t(x.dims.size()) : axis;
    if (a < 0 || a > int64_t(x.dims.size())) bad(n, "axis out of range");
    const int64_t left = checked_product<int64_t>(std::span(x.dims.begin(), size_t(a)), "the flattened shape");
    d = {left, left ? x.count() / left : 0};
  } else if (n.op == "Squeeze") {
    Dims axes = g_.opset >= 13 && has_in(n, 1) ? ints_of(n, 1) : n.get_ints("axes");
    for (int64_t& a : axes) a = norm_axis(n, a, x.dims.size());
    for (size_t k = 0; k < x.dims.size(); ++k) {
      const bool drop = axes.empty() ? x.dims[k] == 1 : std::count(axes.begin(), axes.end(), int64_t(k)) > 0;
      if (drop && x.dims[k] != 1) bad(n, "cannot squeeze a dimension of size " + std::to_string(x.dims[k]));
      if (!drop) d.push_back(x.dims[k]);
    }
  } else if (n.op == "Unsqueeze") {
    Dims axes = g_.opset >= 13 ? ints_of(n, 1) : n.get_ints("axes");
    const size_t rank = x.dims.size() + axes.size();
    for (int64_t& a : axes) a = norm_axis(n, a, rank);
    if (std::set<int64_t>(axes.begin(), axes.end()).size() != axes.size()) bad(n, "axes name one axis twice");
    size_t src = 0;
    for (size_t k = 0; k < rank; ++k)
      d.push_back(std::count(axes.begin(), axes.end(), int64_t(k)) ? 1 : x.dims[src++]);
  } else {  // Identity, Dropout
    d = x.dims;
  }
  for (int64_t v : d)
    if (v < 0) bad(n, "invalid target shape");
  if (checked_product<int64_t>(d, "a shape") != x.count())
    bad(n, "the target shape changes the element count");
  out(n).elem_type = x.elem_type;
  if (x.constant) return set_const(n, d, *x.constant, x.elem_type);
  set(n, d);
}

// Pad: the output shape, and its pads per input dimension (begins, then ends) in `_pads` for the lowering
// (opset 11+ takes them as an input, with optional axes from opset 18; earlier opsets as an attribute).
void Folder::infer_pad(Node& n) {
  const Value& x = in(n, 0);
  const size_t rank = x.dims.size();
  const Dims given = g_.opset >= 11 ? ints_of(n, 1) : n.get_ints("pads");
  Dims axes;
  if (g_.opset >= 18 && has_in(n, 3))
    for (int64_t a : ints_of(n, 3)) axes.push_back(norm_axis(n, a, rank));
  else
    for (size_t a = 0; a < rank; ++a) axes.push_back(int64_t(a));
  if (given.size() != 2 * axes.size())
    bad(n, "has " + std::to_string(given.size()) + " pads for " + std::to_string(axes.size()) + " axes (two an axis)");
  Dims pads(2 * rank, 0), d = x.dims;
  for (size_t k = 0; k < axes.size(); ++k) {
    const size_t a = size_t(axes[k]);
    const int64_t begin = given[k], end = given[k + axes.size()];
    if (begin < 0 || end < 0) bad(n, "negative pads crop: on the DLA crop with a Slice instead");
    if (begin > kMaxTensorElements || end > kMaxTensorElements) bad(n, "pads past any tensor's size");
    pads[a] += begin, pads[a + rank] += end;
    d[a] = checked_add<int64_t>(checked_add<int64_t>(d[a], begin, "a padded dimension"), end, "a padded dimension");
  }
  n.attrs["_pads"] = Attribute{Attribute::kInts, 0, 0, {}, pads, {}, {}};
  out(n).elem_type = x.elem_type;
  set(n, d);
}

void Folder::infer_slice(Node& n) {
  const Value& x = in(n, 0);
  Dims starts, ends, axes, steps;
  if (g_.opset >= 10) {
    starts = ints_of(n, 1), ends = ints_of(n, 2);
    if (has_in(n, 3)) axes = ints_of(n, 3);
    if (has_in(n, 4)) steps = ints_of(n, 4);
  }
  if (axes.empty())
    for (size_t k = 0; k < starts.size(); ++k) axes.push_back(int64_t(k));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (starts.size() != ends.size() || axes.size() != starts.size() || steps.size() != starts.size())
    bad(n, "starts, ends, axes and steps differ in length");
  Dims b(x.dims.size(), 0), st(x.dims.size(), 1), d = x.dims;
  for (size_t k = 0; k < axes.size(); ++k) {
    const size_t a = size_t(norm_axis(n, axes[k], x.dims.size()));
    const int64_t dim = x.dims[a];
    if (steps[k] == 0) bad(n, "step 0");
    // A step longer than the dimension takes one element, as the dimension + 1 does; clamped so the
    // arithmetic below cannot overflow (exporters write INT64_MAX/MIN for "to the end").
    steps[k] = std::clamp<int64_t>(steps[k], -(dim + 1), dim + 1);
    auto clampi = [&](int64_t v, int64_t lo, int64_t hi) { return std::max(lo, std::min(hi, v)); };
    int64_t s0 = starts[k] < 0 ? starts[k] + dim : starts[k], e0 = ends[k] < 0 ? ends[k] + dim : ends[k];
    if (steps[k] > 0) {
      s0 = clampi(s0, 0, dim), e0 = clampi(e0, 0, dim);
      d[a] = std::max<int64_t>(0, (e0 - s0 + steps[k] - 1) / steps[k]);
    } else {
      s0 = clampi(s0, 0, dim - 1), e0 = clampi(e0, -1, dim - 1);
      d[a] = std::max<int64_t>(0, (s0 - e0 + (-steps[k]) - 1) / (-steps[k]));
    }
    b[a] = s0, st[a] = steps[k];
  }
  // Record normalized begin/step for the lowering (one entry per input dimension).
  n.attrs["_begin"] = Attribute{Attribute::kInts, 0, 0, {}, b, {}, {}};
  n.attrs["_step"] = Attribute{Attribute::kInts, 0, 0, {}, st, {}, {}};
  out(n).elem_type = x.elem_type;
  if (!x.constant) return set(n, d);
  ConstData c;
  c.is_float = x.constant->is_float;
  const Dims is = strides_of(x.dims), os = strides_of(d);
  const int64_t count = checked_product<int64_t>(d, "a shape");
  for (int64_t i = 0; i < count; ++i) {
    size_t src = 0;
    for (size_t k = 0; k < d.size(); ++k) src += size_t((b[k] + (i / os[k] % d[k]) * st[k]) * is[k]);
    if (c.is_float) c.f.push_back(x.constant->f[src]);
    else c.i.push_back(x.constant->i[src]);
  }
  set_const(n, d, std::move(c), x.elem_type);
}

void Folder::infer_resize(Node& n) {
  const Dims& x = in(n, 0).dims;
  Dims o = x;
  // Resize(X, roi, scales, sizes) from opset 11; Upsample(X, scales).
  const size_t scales_at = n.op == "Upsample" ? 1 : 2;
  if (n.op == "Resize" && has_in(n, 3) && in(n, 3).constant && in(n, 3).constant->size() > 0) {
    o = ints_of(n, 3);
    if (o.size() != x.size()) bad(n, "sizes must have one entry per dimension");
  } else if (has_in(n, scales_at) && in(n, scales_at).constant && in(n, scales_at).constant->size() > 0) {
    const ConstData& s = *in(n, scales_at).constant;
    if (s.size() != x.size()) bad(n, "scales must have one entry per dimension");
    for (size_t k = 0; k < x.size(); ++k) {
      if (!(s.at(k) > 0 && s.at(k) <= 4096)) bad(n, "scales must be positive and finite");
      o[k] = int64_t(std::floor(double(x[k]) * s.at(k)));
    }
  } else {
    bad(n, "needs constant scales or sizes");
  }
  set(n, o);
}

// Shape inference (and folding) per op: one function each, chosen by table.
void Folder::infer(Node& n) {
  using Infer = void (Folder::*)(Node&);
  static const std::map<std::string, Infer> table = {
      {"Constant", &Folder::infer_constant}, {"Shape", &Folder::infer_shape}, {"Gather", &Folder::infer_gather},
      {"Cast", &Folder::infer_cast}, {"ConstantOfShape", &Folder::infer_constant_of_shape},
      {"Concat", &Folder::infer_concat}, {"Transpose", &Folder::infer_transpose}, {"Range", &Folder::infer_range},
      {"Reshape", &Folder::infer_reshape_like}, {"Flatten", &Folder::infer_reshape_like},
      {"Squeeze", &Folder::infer_reshape_like}, {"Unsqueeze", &Folder::infer_reshape_like},
      {"Identity", &Folder::infer_reshape_like}, {"Dropout", &Folder::infer_reshape_like},
      {"Slice", &Folder::infer_slice}, {"Pad", &Folder::infer_pad}, {"Conv", &Folder::infer_conv_node}, {"ConvTranspose", &Folder::infer_deconv_node},
      {"MaxPool", &Folder::infer_pool}, {"AveragePool", &Folder::infer_pool}, {"GlobalAveragePool", &Folder::infer_pool},
      {"GlobalMaxPool", &Folder::infer_pool}, {"Resize", &Folder::infer_resize}, {"Upsample", &Folder::infer_resize},
      {"Gemm", &Folder::infer_gemm}, {"MatMul", &Folder::infer_matmul}, {"DequantizeLinear", &Folder::infer_dequantize},
      {"Softmax", &Folder::infer_same_shape}, {"LRN", &Folder::infer_same_shape},
      {"BatchNormalization", &Folder::infer_same_shape}, {"Relu", &Folder::infer_same_shape},
      {"LeakyRelu", &Folder::infer_same_shape}, {"Sigmoid", &Folder::infer_same_shape}, {"Tanh", &Folder::infer_same_shape},
      {"Clip", &Folder::infer_same_shape}, {"Abs", &Folder::infer_same_shape}, {"QuantizeLinear", &Folder::infer_quantize},
      {"PRelu", &Folder::infer_elementwise}, {"Add", &Folder::infer_elementwise}, {"Sub", &Folder::infer_elementwise},
      {"Mul", &Folder::infer_elementwise}, {"Div", &Folder::infer_elementwise}, {"Max", &Folder::infer_elementwise},
      {"Min", &Folder::infer_elementwise}, {"Sum", &Folder::infer_elementwise}, {"Pow", &Folder::infer_elementwise},
      {"Equal", &Folder::infer_elementwise}, {"Where", &Folder::infer_elementwise}, {"Floor", &Folder::infer_elementwise},
      {"Ceil", &Folder::infer_elementwise}, {"Sqrt", &Folder::infer_elementwise}, {"Neg", &Folder::infer_elementwise},
      {"Reciprocal", &Folder::infer_elementwise}, {"Expand", &Folder::infer_expand},
      {"ReduceMean", &Folder::infer_reduce}, {"ReduceMax", &Folder::infer_reduce}, {"ReduceSum", &Folder::infer_reduce},
      {"ReduceMin", &Folder::infer_reduce}, {"ReduceProd", &Folder::infer_reduce}, {"Split", &Folder::infer_split},
  };
  const auto it = table.find(n.op);
  (this->*(it == table.end() ? &Folder::infer_unsupported : it->second))(n);
}

// Expand: a constant input folds into the expanded constant (a [1, C, 1, 1] bias broadcast to the
// activation's shape before an Add); otherwise only the shape.
void Folder::infer_expand(Node& n) {
  const Value& x = in(n, 0);
  const Dims d = broadcast(n, x.dims, ints_of(n, 1));
  if (!x.constant) return set(n, d);
  const size_t count = size_t(checked_product<int64_t>(d, "a shape"));
  ConstData c;
  c.is_float = x.constant->is_float;
  for (size_t i = 0; i < count; ++i) {
    const size_t at = bcast_index(i, d, x.dims);
    if (c.is_float) c.f.push_back(x.constant->at(at));
    else c.i.push_back(x.constant->int_at(at));
  }
  set_const(n, d, std::move(c), x.elem_type);
}

// Ops the DLA cannot run: their shapes still let `check` judge the nodes after them.
void Folder::infer_unsupported(Node& n) {
  const std::string& op = n.op;
  static const char* const same_shape[] = {"HardSigmoid", "HardSwish", "Gelu", "Elu", "Selu", "Exp", "Log", "Erf",
                                           "Not", "Sin", "Cos", "Softplus", "Softsign", "Mish", "Celu", "ThresholdedRelu",
                                           "Round", "Sign", "IsNaN", "IsInf", "LogSoftmax", "Hardmax",
                                           "InstanceNormalization", "LpNormalization", "MeanVarianceNormalization"};
  if (std::find(std::begin(same_shape), std::end(same_shape), op) != std::end(same_shape)) return set(n, in(n, 0).dims);
  if (op == "Pad" && has_in(n, 1) && in(n, 1).constant && !has_in(n, 3)) {
    Dims d = in(n, 0).dims;
    const Dims pads = ints_of(n, 1);
    if (pads.size() != 2 * d.size()) bad(n, "pads must hold two values per dimension");
    for (size_t k = 0; k < d.size(); ++k) d[k] += pads[k] + pads[k + d.size()];
    return set(n, d);
  }
  bad(n, "operator '" + op + "' is not supported by the DLA builder");
}

void Folder::infer_constant(Node& n) {
  auto it = n.attrs.find("value");
  if (it != n.attrs.end() && it->second.tensor) {
    Value v = *it->second.tensor;
    return set_const(n, v.dims, *v.constant, v.elem_type);
  }
  ConstData c;
  if (n.has("value_float")) return set_const(n, {}, ConstData{true, {n.get_float("value_float", 0)}, {}}, 1);
  if (n.has("value_int")) return set_const(n, {}, ConstData{false, {}, {n.get_int("value_int", 0)}}, 7);
  if (n.has("value_ints")) {
    const Dims v = n.get_ints("value_ints");
    return set_const(n, {int64_t(v.size())}, ConstData{false, {}, v}, 7);
  }
  bad(n, "unsupported Constant form");
}

void Folder::infer_shape(Node& n) {
  const Dims& d = in(n, 0).dims;
  int64_t start = n.get_int("start", 0), end = n.get_int("end", int64_t(d.size()));
  const int64_t r = int64_t(d.size());
  start = std::clamp<int64_t>(start < 0 ? start + r : start, 0, r);
  end = std::clamp<int64_t>(end < 0 ? end + r : end, 0, r);
  ConstData c{false, {}, Dims(d.begin() + start, d.begin() + std::max(start, end))};
  const int64_t len = int64_t(c.i.size());  // before the move below
  return set_const(n, {len}, std::move(c), 7);
}

void Folder::infer_gather(Node& n) {
  const Value& data = in(n, 0);
  const Dims idx = ints_of(n, 1);
  const int64_t axis = norm_axis(n, n.get_int("axis", 0), data.dims.size());
  if (!data.constant) bad(n, "Gather runs on the DLA only when it can be folded (constant data)");
  const Value& iv = in(n, 1);
  Dims d;
  for (int64_t k = 0; k < axis; ++k) d.push_back(data.dims[size_t(k)]);
  d.insert(d.end(), iv.dims.begin(), iv.dims.end());
  for (size_t k = size_t(axis) + 1; k < data.dims.size(); ++k) d.push_back(data.dims[k]);
  const Dims ds = strides_of(data.dims);
  const int64_t outer = checked_product<int64_t>(std::span(data.dims.begin(), size_t(axis)), "a shape");
  const int64_t inner = ds[size_t(axis)];
  ConstData c;
  c.is_float = data.constant->is_float;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j : idx) {
      const int64_t dim = data.dims[size_t(axis)];
      const int64_t jj = j < 0 ? j + dim : j;
      if (jj < 0 || jj >= dim) bad(n, "index out of range");
      for (int64_t in_ = 0; in_ < inner; ++in_) {
        const size_t src = size_t((o * dim + jj) * inner + in_);
        if (c.is_float) c.f.push_back(data.constant->f[src]);
        else c.i.push_back(data.constant->i[src]);
      }
    }
  return set_const(n, d, std::move(c), data.elem_type);
}

void Folder::infer_cast(Node& n) {
  const Value& x = in(n, 0);
  const int64_t to = n.get_int("to", 1);
  out(n).elem_type = int32_t(to);
  if (!x.constant) return set(n, x.dims);
  ConstData c;
  c.is_float = to == 1 || to == 10 || to == 11 || to == 16;
  for (size_t k = 0; k < x.constant->size(); ++k) {
    if (c.is_float) c.f.push_back(x.constant->at(k));
    else if (to == 9) c.i.push_back(x.constant->at(k) != 0);  // bool: any non-zero value is true
    else c.i.push_back(x.constant->int_at(k));                 // NaN, inf, out of range: an error
  }
  return set_const(n, x.dims, std::move(c), int32_t(to));
}

void Folder::infer_constant_of_shape(Node& n) {
  const Dims d = ints_of(n, 0);
  ConstData c;
  double v = 0;
  int32_t elem = 1;
  auto it = n.attrs.find("value");
  if (it != n.attrs.end() && it->second.tensor) {
    v = it->second.tensor->constant->at(0);
    elem = it->second.tensor->elem_type;
    c.is_float = it->second.tensor->constant->is_float;
  }
  const int64_t count = checked_product<int64_t>(d, "a shape");
  if (count > (int64_t(1) << 24)) bad(n, "constant too large to fold");
  if (c.is_float) c.f.assign(size_t(count), v);
  else c.i.assign(size_t(count), checked_int<int64_t>(v, "node '" + n.label() + "' (ConstantOfShape): the value"));
  return set_const(n, d, std::move(c), elem);
}

void Folder::infer_concat(Node& n) {
  const int64_t axis = norm_axis(n, n.get_int("axis", 0), in(n, 0).dims.size());
  Dims d = in(n, 0).dims;
  d[size_t(axis)] = 0;
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    const Dims& e = in(n, k).dims;
    if (e.size() != d.size()) bad(n, "inputs differ in rank");
    for (size_t a = 0; a < d.size(); ++a)
      if (a != size_t(axis) && e[a] != d[a]) bad(n, "inputs differ outside the concat axis");
    d[size_t(axis)] += e[size_t(axis)];
  }
  out(n).elem_type = in(n, 0).elem_type;
  if (!all_const(n)) return set(n, d);
  ConstData c;
  c.is_float = in(n, 0).constant->is_float;
  const int64_t outer = checked_product<int64_t>(std::span(d.begin(), size_t(axis)), "a shape");
  for (int64_t o = 0; o < outer; ++o)
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      const Value& v = in(n, k);
      const int64_t chunk = v.count() / std::max<int64_t>(outer, 1);
      for (int64_t j = 0; j < chunk; ++j) {
        const size_t src = size_t(o * chunk + j);
        if (c.is_float) c.f.push_back(v.constant->at(src));
        else c.i.push_back(v.constant->int_at(src));
      }
    }
  return set_const(n, d, std::move(c), in(n, 0).elem_type);
}

void Folder::infer_transpose(Node& n) {
  const Value& x = in(n, 0);
  Dims perm = n.get_ints("perm");
  if (perm.empty())
    for (int64_t k = int64_t(x.dims.size()) - 1; k >= 0; --k) perm.push_back(k);
  if (perm.size() != x.dims.size()) bad(n, "perm length differs from the rank");
  Dims d;
  for (int64_t& p : perm) {
    p = norm_axis(n, p, x.dims.size());
    d.push_back(x.dims[size_t(p)]);
  }
  if (std::set<int64_t>(perm.begin(), perm.end()).size() != perm.size()) bad(n, "perm repeats an axis");
  n.attrs["perm"].kind = Attribute::kInts;
  n.attrs["perm"].ints = perm;
  out(n).elem_type = x.elem_type;
  if (!x.constant) return set(n, d);
  const Dims is = strides_of(x.dims), os = strides_of(d);
  ConstData c;
  c.is_float = x.constant->is_float;
  for (int64_t i = 0; i < x.count(); ++i) {
    size_t src = 0;
    for (size_t k = 0; k < d.size(); ++k) src += size_t((i / os[k] % d[k]) * is[size_t(perm[k])]);
    if (c.is_float) c.f.push_back(x.constant->f[src]);
    else c.i.push_back(x.constant->i[src]);
  }
  return set_const(n, d, std::move(c), x.elem_type);
}

void Folder::infer_range(Node& n) {
  for (size_t k = 0; k < 3; ++k)
    if (!in(n, k).constant || in(n, k).constant->size() != 1)
      bad(n, "Range runs only at build time: start, limit and delta must be scalar constants");
  const double s = in(n, 0).constant->at(0), l = in(n, 1).constant->at(0), dl = in(n, 2).constant->at(0);
  if (dl == 0) bad(n, "delta 0");
  ConstData c;
  c.is_float = in(n, 0).constant->is_float;
  if (!std::isfinite(s) || !std::isfinite(l) || std::fabs((l - s) / dl) > double(1 << 24)) bad(n, "range too large to fold");
  for (double v = s; dl > 0 ? v < l : v > l; v += dl) {
    if (c.is_float) c.f.push_back(v);
    else c.i.push_back(checked_int<int64_t>(v, "node '" + n.label() + "' (Range): a value"));
  }
  const int64_t len = int64_t(c.size());  // before the move below
  return set_const(n, {len}, std::move(c), in(n, 0).elem_type);
}

void Folder::infer_gemm(Node& n) {
  const Dims& a = in(n, 0).dims;
  const Dims& b = in(n, 1).dims;
  if (a.size() != 2 || b.size() != 2) bad(n, "Gemm needs 2-D inputs");
  const int64_t m = n.get_int("transA", 0) ? a[1] : a[0];
  const int64_t k = n.get_int("transB", 0) ? b[0] : b[1];
  const int64_t inner_a = n.get_int("transA", 0) ? a[0] : a[1], inner_b = n.get_int("transB", 0) ? b[1] : b[0];
  if (inner_a != inner_b) bad(n, "inner dimensions of A and B differ");
  return set(n, {m, k});
}

void Folder::infer_matmul(Node& n) {
  Dims a = in(n, 0).dims;
  const Dims& b = in(n, 1).dims;
  if (b.size() != 2 || a.empty()) bad(n, "MatMul runs on the DLA only with a 2-D constant right-hand side");
  if (a.back() != b[0]) bad(n, "inner dimensions differ");
  a.back() = b[1];
  return set(n, a);
}

// The axis a per-axis scale runs along (0 for a per-tensor one), checked as ONNX Runtime checks it: one
// scale per index of that axis, and a zero point of as many values.
int64_t Folder::quant_axis(const Node& n, const Value& x, const Value& sc) {
  if (has_in(n, 2) && in(n, 2).count() != sc.count())
    bad(n, "has " + std::to_string(sc.count()) + " scales and " + std::to_string(in(n, 2).count()) + " zero points");
  if (sc.count() == 1 && sc.dims.size() <= 1) return 0;
  const int64_t axis = norm_axis(n, n.get_int("axis", 1), x.dims.size());
  if (sc.dims.size() != 1 || sc.count() != x.dims[size_t(axis)])
    bad(n, "has " + std::to_string(sc.count()) + " scales along axis " + std::to_string(axis) + ", of size " +
               std::to_string(x.dims[size_t(axis)]) + ": a per-axis scale needs one value per index (set 'axis')");
  return axis;
}

// The type a QuantizeLinear writes: its zero point's, else its output_dtype attribute's (opset 21), else
// uint8 (ONNX's default). lower_qdq accepts int8 only.
static int32_t quantized_type(const Graph& g, const Node& n) {
  if (n.inputs.size() > 2 && !n.inputs[2].empty()) return g.value(n.inputs[2]).elem_type;
  const int64_t declared = n.get_int("output_dtype", 0);
  return declared != 0 ? int32_t(declared) : 2;
}

// Q of a constant (a Q/DQ pair on a weight or an operand) folds: round half to even, saturate to the
// type's range, as ONNX Runtime computes it; the DequantizeLinear after it then folds too.
void Folder::infer_quantize(Node& n) {
  const int32_t type = quantized_type(g_, n);
  if (!all_const(n)) {
    out(n).elem_type = type;
    return set(n, in(n, 0).dims);
  }
  const Value& x = in(n, 0);
  const Value& sc = in(n, 1);
  const int64_t axis = quant_axis(n, x, sc);
  double lo, hi;
  switch (type) {
    case 3: lo = -128, hi = 127; break;      // int8
    case 2: lo = 0, hi = 255; break;         // uint8
    case 5: lo = -32768, hi = 32767; break;  // int16
    case 4: lo = 0, hi = 65535; break;       // uint16
    default: bad(n, "quantizes a constant to " + type_name(type) + ", which the builder does not fold");
  }
  const Dims xs = strides_of(x.dims);
  ConstData c;
  c.is_float = false;
  for (int64_t i = 0; i < x.count(); ++i) {
    const size_t ch = sc.count() > 1 ? size_t(i / xs[size_t(axis)] % x.dims[size_t(axis)]) : 0;
    const double scale = sc.constant->at(ch);
    if (!(scale > 0) || !std::isfinite(scale)) bad(n, "has a scale that is not a positive finite number");
    const double zp = has_in(n, 2) ? in(n, 2).constant->at(ch) : 0.0;
    // ONNX computes x / scale in float32, then rounds half to even.
    const float ratio = float(x.constant->at(size_t(i))) / float(scale);
    if (std::isnan(ratio)) bad(n, "quantizes a NaN, which has no integer code");
    c.i.push_back(int64_t(std::clamp(std::nearbyint(double(ratio)) + zp, lo, hi)));
  }
  return set_const(n, x.dims, std::move(c), type);
}

// A DequantizeLinear of constant codes (Q/DQ weights, or a constant's Q/DQ pair) must hold what the DLA's
// INT8 holds: int8 (or int32, a bias) codes with zero points of 0. Folding any other form would compute
// the model's values, but an INT8 build then re-quantizes them symmetrically (codes past int8's range
// on one side: other numbers than the model's, without a word), and TensorRT's ONNX parser refuses such
// a model outright ("TensorRT only supports symmetric quantization"): refused here as there.
void Folder::check_symmetric_codes(const Node& n) {
  static const std::string kFix = ": quantize weights to int8 with zero points of 0 (onnxruntime's quantize_static: "
                                  "weight_type=QuantType.QInt8, whose default is WeightSymmetric=True)";
  const int32_t type = in(n, 0).elem_type;
  if (type == 2 || type == 4)  // uint8, uint16: no zero point makes them signed
    bad(n, "dequantizes " + type_name(type) + " codes; the DLA's INT8 is signed with zero point 0" + kFix);
  if (!has_in(n, 2)) return;
  const ConstData& zp = *in(n, 2).constant;
  for (size_t i = 0; i < zp.size(); ++i)
    if (zp.at(i) != 0)
      bad(n, "has the zero point " + std::to_string(int64_t(zp.at(i))) +
                 (zp.size() > 1 ? " (index " + std::to_string(i) + ")" : "") +
                 "; the DLA quantizes symmetrically and TensorRT refuses Q/DQ zero points other than 0" + kFix);
}

void Folder::infer_dequantize(Node& n) {
  if (!all_const(n)) return infer_same_shape(n);  // an activation's Q/DQ pair: a scale only
  check_symmetric_codes(n);
  // Q/DQ weights: fold x_q -> x_q * scale, per tensor or per axis.
  const Value& x = in(n, 0);
  const Value& sc = in(n, 1);
  const int64_t axis = quant_axis(n, x, sc);
  const Dims xs = strides_of(x.dims);
  ConstData c;
  for (int64_t i = 0; i < x.count(); ++i) {
    const size_t ch = sc.count() > 1 ? size_t(i / xs[size_t(axis)] % x.dims[size_t(axis)]) : 0;
    c.f.push_back(x.constant->at(size_t(i)) * sc.constant->at(ch));
  }
  return set_const(n, x.dims, std::move(c), 1);
}

void Folder::infer_same_shape(Node& n) {
  const std::string& op = n.op;
  out(n).elem_type = 1;
  if (op == "BatchNormalization")
    for (size_t k = 1; k < n.outputs.size(); ++k)
      if (!n.outputs[k].empty()) set(n, {in(n, 0).dims.size() > 1 ? in(n, 0).dims[1] : 1}, k);
  return set(n, in(n, 0).dims);
}

void Folder::infer_reduce(Node& n) {
  const std::string& op = n.op;
  const Value& x = in(n, 0);
  Dims axes = n.get_ints("axes");
  const bool axes_input = (op == "ReduceSum" && g_.opset >= 13) || g_.opset >= 18;
  // onnx's checker and ONNX Runtime refuse the attribute where the input replaced it.
  if (axes_input && n.has("axes"))
    bad(n, "has an 'axes' attribute, which " + op + " no longer has at opset " + std::to_string(g_.opset) +
           " (axes are its second input from opset " + (op == "ReduceSum" ? "13" : "18") + "): give them as an input");
  if (axes_input && has_in(n, 1)) axes = ints_of(n, 1);
  if (axes.empty())
    for (size_t k = 0; k < x.dims.size(); ++k) axes.push_back(int64_t(k));
  for (int64_t& a : axes) a = norm_axis(n, a, x.dims.size());
  const bool keep = n.get_int("keepdims", 1) != 0;
  Dims d;
  for (size_t k = 0; k < x.dims.size(); ++k) {
    const bool red = std::count(axes.begin(), axes.end(), int64_t(k)) > 0;
    if (!red) d.push_back(x.dims[k]);
    else if (keep) d.push_back(1);
  }
  n.attrs["_axes"] = Attribute{Attribute::kInts, 0, 0, {}, axes, {}, {}};
  if (x.constant && op == "ReduceProd") {
    if (axes.size() != x.dims.size()) bad(n, "ReduceProd is folded over all axes only");
    double p = 1;
    for (size_t k = 0; k < x.constant->size(); ++k) p *= x.constant->at(k);
    // A float product stays a float (1.5^3 is 3.375, not 3); an integer one (a shape's size) an int64.
    if (x.constant->is_float) return set_const(n, d, ConstData{true, {p}, {}}, x.elem_type);
    return set_const(n, d, ConstData{false, {}, {checked_int<int64_t>(p, "node '" + n.label() + "' (ReduceProd)")}}, 7);
  }
  return set(n, d);
}

void Folder::infer_split(Node& n) {
  const Value& x = in(n, 0);
  const int64_t axis = norm_axis(n, n.get_int("axis", 0), x.dims.size());
  Dims parts = g_.opset >= 13 && has_in(n, 1) ? ints_of(n, 1) : n.get_ints("split");
  if (parts.empty()) {
    const int64_t k = int64_t(n.outputs.size());
    const int64_t total = x.dims[size_t(axis)], each = (total + k - 1) / k;
    for (int64_t j = 0; j < k; ++j) parts.push_back(std::min(each, total - j * each));
  }
  if (parts.size() != n.outputs.size()) bad(n, "split sizes do not match the outputs");
  int64_t sum = 0;
  for (int64_t v : parts) {
    if (v < 0) bad(n, "negative split size");
    sum = checked_add<int64_t>(sum, v, "the split sizes");
  }
  if (sum != x.dims[size_t(axis)]) bad(n, "split sizes do not add up to the dimension");
  for (size_t k = 0; k < parts.size(); ++k) {
    Dims d = x.dims;
    d[size_t(axis)] = parts[k];
    set(n, d, k);
  }
  n.attrs["_split"] = Attribute{Attribute::kInts, 0, 0, {}, parts, {}, {}};
  n.attrs["_axis"] = Attribute{Attribute::kInt, axis, 0, {}, {}, {}, {}};
  return;
}

}  // namespace

void infer_and_fold(Graph& g, std::vector<NodeIssue>* issues) { Folder(g, issues).run(); }

}  // namespace softdla::builder
