#include "op_rules.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "error.h"

namespace softdla::builder {
namespace {

using U = InputUse;

using D = AttrDomain;
using K = Attribute::Kind;

// Shorthands keep the table one line per op where possible: I an int, Is ints, F a float, S a string,
// T a tensor; Ionly/Sonly an attribute honoured at one value only.
AttrRule I(const char* name, D d = D::kAny, const char* note = "") { return {name, K::kInt, d, std::nullopt, std::nullopt, note}; }
AttrRule Is(const char* name, D d = D::kAny, const char* note = "") { return {name, K::kInts, d, std::nullopt, std::nullopt, note}; }
AttrRule F(const char* name, D d = D::kFinite, const char* note = "") { return {name, K::kFloat, d, std::nullopt, std::nullopt, note}; }
AttrRule S(const char* name, const char* note = "") { return {name, K::kString, D::kAny, std::nullopt, std::nullopt, note}; }
AttrRule T(const char* name) { return {name, K::kTensor, D::kAny, std::nullopt, std::nullopt, ""}; }
AttrRule Ionly(const char* name, int64_t only, const char* note = "") { return {name, K::kInt, D::kAny, only, std::nullopt, note}; }
AttrRule Sonly(const char* name, const char* only, const char* note = "") {
  return {name, K::kString, D::kAny, std::nullopt, std::string(only), note};
}

std::vector<OpRule> make_rules() {
  const std::vector<InputRule> x{{"X", U::kData}};
  const std::vector<InputRule> ab{{"A", U::kData}, {"B", U::kData}};
  const std::vector<AttrRule> conv_attrs{S("auto_pad", "SAME refused where it asks for negative padding (a stride beyond the kernel)"),
                                         Is("dilations", D::kSpatial), I("group", D::kPositive),
                                         Is("kernel_shape", D::kSpatial), Is("pads", D::kPads), Is("strides", D::kSpatial)};
  // The DLA's deconvolution has no padding, dilation or groups: the lowering refuses other values.
  std::vector<AttrRule> deconv_attrs{S("auto_pad", "VALID, or SAME where it comes out as no padding"),
                                     Is("dilations", D::kSpatial, "1 only"),
                                     I("group", D::kPositive, "1 only"), Is("kernel_shape", D::kSpatial),
                                     Is("pads", D::kPads, "0 only"), Is("strides", D::kSpatial)};
  deconv_attrs.push_back(Is("output_padding", D::kSpatialNonNeg, "0 only on the DLA"));
  deconv_attrs.push_back(Is("output_shape", D::kSpatial, "resolved into padding, which must come out 0"));
  const std::vector<AttrRule> reduce_attrs{Is("axes", D::kAxes), I("keepdims", D::kBool), Ionly("noop_with_empty_axes", 0)};
  const std::vector<InputRule> reduce_inputs{{"data", U::kData}, {"axes", U::kConstant, true}};
  const std::vector<InputRule> shape_axes{{"data", U::kData}, {"axes", U::kConstant, true}};
  const std::vector<InputRule> unary_const{{"input", U::kConstant}};
  return {
      {"Conv", "Conv (BN, bias and activation fused)", {{"X", U::kData}, {"W", U::kConstant}, {"B", U::kConstant, true}}, conv_attrs},
      {"ConvTranspose", "Deconv", {{"X", U::kData}, {"W", U::kConstant}, {"B", U::kConstant, true}}, deconv_attrs},
      {"Gemm", "1x1 Conv (or HxW Conv over a flattened 4-D tensor); C one value or a row vector", {{"A", U::kData}, {"B", U::kConstant}, {"C", U::kConstant, true}},
       {F("alpha"), F("beta"), Ionly("transA", 0), I("transB", D::kBool)}},
      {"MatMul", "1x1 Conv", {{"A", U::kData}, {"B", U::kConstant}}, {}},
      {"Add", "SDP bias / element-wise add", ab, {}},
      {"Sub", "SDP bias / element-wise subtract", ab, {}},
      {"Mul", "SDP scale / element-wise multiply", ab, {}},
      {"Div", "SDP scale by a constant's reciprocal / element-wise divide (the dividend full-size)", ab, {}},
      {"Max", "SDP element-wise max", {{"data_0", U::kData}}, {}, 1, true},
      {"Min", "SDP element-wise min", {{"data_0", U::kData}}, {}, 1, true},
      {"Sum", "SDP element-wise adds", {{"data_0", U::kData}}, {}, 1, true},
      {"Neg", "SDP scale by -1", x, {}},
      {"MaxPool", "Pool (max)", x,
       {S("auto_pad", "SAME refused where it asks for negative padding"), I("ceil_mode", D::kBool),
        Is("dilations", D::kSpatial, "1 only"), Is("kernel_shape", D::kSpatial),
        Is("pads", D::kPads), I("storage_order", D::kBool, "affects only the Indices output, which is rejected"),
        Is("strides", D::kSpatial)}},
      {"AveragePool", "Pool (average; in INT8 a depthwise Conv with its own output range)", x,
       {S("auto_pad", "SAME refused where it asks for negative padding"),
        I("ceil_mode", D::kBool, "the windows' overhang past the padding never counted; refused with count_include_pad = 1 and pads"),
        I("count_include_pad", D::kBool), Is("dilations", D::kSpatial, "1 only"),
        Is("kernel_shape", D::kSpatial), Is("pads", D::kPads), Is("strides", D::kSpatial)}},
      {"GlobalAveragePool", "chain of average pools (windows <= 8; in INT8 depthwise Convs)", x, {}},
      {"GlobalMaxPool", "ReduceMax over H, W", x, {}},
      {"ReduceMean", "average pools (H, W) or a 1x1 Conv (C)", reduce_inputs, reduce_attrs},
      {"ReduceMax", "ReduceMax", reduce_inputs, reduce_attrs},
      {"ReduceSum", "the ReduceMean lowering scaled by the element count", reduce_inputs, reduce_attrs},
      {"Reshape", "nothing, or a Shuffle", {{"data", U::kData}, {"shape", U::kConstant}}, {I("allowzero", D::kBool)}},
      {"Flatten", "nothing, or a Shuffle", {{"input", U::kData}}, {I("axis", D::kFlattenAxis)}},
      {"Squeeze", "nothing, or a Shuffle", shape_axes, {Is("axes", D::kAxes)}},
      {"Unsqueeze", "nothing, or a Shuffle", shape_axes, {Is("axes", D::kUnsqueezeAxes)}},
      {"Transpose", "Shuffle", {{"data", U::kData}}, {Is("perm", D::kPerm)}},
      {"Identity", "nothing", {{"input", U::kData}}, {}},
      {"Pad", "nothing where its pads are all 0; zeros around H and W before a Conv become the Conv's padding",
       {{"data", U::kData}, {"pads", U::kConstant, true}, {"constant_value", U::kConstant, true}, {"axes", U::kConstant, true}},
       {Sonly("mode", "constant"), Is("pads"), F("value", D::kFinite, "0 only: the Conv pads with zeros")}},
      {"Dropout", "nothing (inference)", {{"data", U::kData}, {"ratio", U::kUnused, true}, {"training_mode", U::kFalseOnly, true}},
       {I("seed", D::kAny, "unused in inference"), F("ratio", D::kAny, "unused in inference")}},
      {"Resize", "Resize (nearest or bilinear, whole factors; given scales must be whole numbers)",
       {{"X", U::kData}, {"roi", U::kUnused, true}, {"scales", U::kConstant, true}, {"sizes", U::kConstant, true}},
       {Ionly("antialias", 0), S("coordinate_transformation_mode"), F("cubic_coeff_a", D::kAny, "cubic mode is rejected"),
        Ionly("exclude_outside", 0), F("extrapolation_value", D::kAny, "tf_crop_and_resize is rejected"),
        Sonly("keep_aspect_ratio_policy", "stretch"), S("mode"), S("nearest_mode")}},
      {"Upsample", "Resize", {{"X", U::kData}, {"scales", U::kConstant}}, {S("mode")}},
      {"Split", "Slices", {{"input", U::kData}, {"split", U::kConstant, true}},
       {I("axis", D::kAxis), Is("split"), I("num_outputs", D::kPositive)}, -1},
      {"Slice", "Slice (steps 1)",
       {{"data", U::kData}, {"starts", U::kConstant}, {"ends", U::kConstant}, {"axes", U::kConstant, true},
        {"steps", U::kConstant, true}},
       {}},
      {"Concat", "Concat (channels); one input: nothing", {{"inputs", U::kData}}, {I("axis", D::kAxis)}, 1, true},
      {"Softmax", "Softmax", {{"input", U::kData}}, {I("axis", D::kAxis)}},
      {"LRN", "Lrn", x, {F("alpha"), F("beta"), F("bias"), I("size", D::kPositive, "3, 5, 7 or 9 on the DLA")}},
      {"Abs", "Unary", x, {}},
      {"BatchNormalization", "SDP scale + bias, or folded into the Conv before it",
       {{"X", U::kData}, {"scale", U::kConstant}, {"B", U::kConstant}, {"input_mean", U::kConstant},
        {"input_var", U::kConstant}},
       {F("epsilon"), F("momentum", D::kAny, "unused in inference"), Ionly("training_mode", 0)}},
      {"Relu", "SDP ReLU", x, {}},
      {"LeakyRelu", "SDP PReLU", x, {F("alpha")}},
      {"PRelu", "SDP PReLU (per channel or one slope)", {{"X", U::kData}, {"slope", U::kConstant}}, {}},
      {"Clip", "SDP clip", {{"input", U::kData}, {"min", U::kConstant, true}, {"max", U::kConstant, true}}, {}},
      {"Sigmoid", "SDP sigmoid", x, {}},
      {"Tanh", "SDP tanh", x, {}},
      {"QuantizeLinear", "a Q/DQ pair on an activation: the INT8 scale of its input, or an op of its own where that would change what another reader sees",
       {{"x", U::kData}, {"y_scale", U::kConstant}, {"y_zero_point", U::kConstant, true}},
       {I("axis", D::kAxis), I("saturate", D::kBool), I("output_dtype"), Ionly("block_size", 0)}},
      {"DequantizeLinear", "folded into constant weights, or the second half of a Q/DQ pair",
       {{"x", U::kData}, {"x_scale", U::kConstant}, {"x_zero_point", U::kConstant, true}}, {I("axis", D::kAxis), Ionly("block_size", 0)}},
      // Shape arithmetic: evaluated at build time, never on the DLA.
      {"Constant", "folded", {}, {T("value"), F("value_float"), I("value_int"), Is("value_ints")}, 1, false, true},
      {"Shape", "folded", {{"data", U::kData}}, {I("start"), I("end")}, 1, false, true},
      {"Gather", "folded", {{"data", U::kConstant}, {"indices", U::kConstant}}, {I("axis", D::kAxis)}, 1, false, true},
      {"Cast", "folded; of an activation, float32 <-> float16 only: nothing (a layer's precision is the build's)",
       {{"input", U::kData}}, {I("to"), I("saturate", D::kBool)}},
      {"ConstantOfShape", "folded", unary_const, {T("value")}, 1, false, true},
      {"Range", "folded", {{"start", U::kConstant}, {"limit", U::kConstant}, {"delta", U::kConstant}}, {}, 1, false, true},
      {"Floor", "folded", unary_const, {}, 1, false, true},
      {"Ceil", "folded", unary_const, {}, 1, false, true},
      {"Sqrt", "folded", unary_const, {}, 1, false, true},
      {"Reciprocal", "folded", unary_const, {}, 1, false, true},
      {"Pow", "folded", {{"X", U::kConstant}, {"Y", U::kConstant}}, {}, 1, false, true},
      {"ReduceProd", "folded (over all axes)", {{"data", U::kConstant}, {"axes", U::kConstant, true}}, {Is("axes", D::kAxes, "all of them only"), I("keepdims", D::kBool)}, 1,
       false, true},
      {"Equal", "folded", {{"A", U::kConstant}, {"B", U::kConstant}}, {}, 1, false, true},
      {"Where", "folded", {{"condition", U::kConstant}, {"X", U::kConstant}, {"Y", U::kConstant}}, {}, 1, false, true},
      {"Expand", "folded", {{"input", U::kConstant}, {"shape", U::kConstant}}, {}, 1, false, true},
  };
}

[[noreturn]] void bad(const Node& n, const std::string& msg) { fail("node '", n.label(), "' (", n.op, "): ", msg); }

bool is_false_constant(const Graph& g, const std::string& v) {
  if (!g.is_const(v)) return false;
  const ConstData& c = *g.value(v).constant;
  for (size_t k = 0; k < c.size(); ++k)
    if (c.at(k) != 0) return false;
  return true;
}

const char* kind_name(Attribute::Kind k) {
  switch (k) {
    case K::kInt: return "an int";
    case K::kFloat: return "a float";
    case K::kString: return "a string";
    case K::kInts: return "a list of ints";
    case K::kFloats: return "a list of floats";
    case K::kTensor: return "a tensor";
    case K::kNone: break;
  }
  return "of an unsupported type";
}

std::string ints_text(const std::vector<int64_t>& v) {
  std::string t = "[";
  for (size_t k = 0; k < v.size(); ++k) t += (k ? ", " : "") + std::to_string(v[k]);
  return t + "]";
}

// The value rules of AttrDomain; `rank` is the first input's rank (-1 when the node has no input).
void check_domain(const Node& n, const std::string& name, const Attribute& a, AttrDomain d, int64_t rank) {
  auto need = [&](bool ok, const std::string& what) {
    if (!ok) bad(n, "attribute '" + name + "' must be " + what);
  };
  const int64_t spatial = rank - 2;
  auto each = [&](int64_t lo, const char* what) {
    for (int64_t v : a.ints) need(v >= lo, std::string(what) + "; it is " + ints_text(a.ints));
  };
  auto count = [&](int64_t want, const char* per) {
    need(int64_t(a.ints.size()) == want,
         std::to_string(want) + " values (" + per + " of the rank-" + std::to_string(rank) + " input); it has " +
             std::to_string(a.ints.size()));
  };
  auto axis_ok = [](int64_t v, int64_t r) { return v >= -r && v < r; };
  switch (d) {
    case D::kAny: return;
    case D::kBool: need(a.i == 0 || a.i == 1, "0 or 1; it is " + std::to_string(a.i)); return;
    case D::kPositive: need(a.i >= 1, "at least 1; it is " + std::to_string(a.i)); return;
    case D::kFinite: need(std::isfinite(a.f), "a finite number"); return;
    case D::kSpatial:
    case D::kSpatialNonNeg:
    case D::kPads:
      if (rank >= 0) count(d == D::kPads ? 2 * spatial : spatial, d == D::kPads ? "two per spatial dim" : "one per spatial dim");
      each(d == D::kSpatial ? 1 : 0, d == D::kSpatial ? "at least 1 each" : "at least 0 each");
      return;
    case D::kAxis:
      if (rank >= 0) need(axis_ok(a.i, rank), "in [" + std::to_string(-rank) + ", " + std::to_string(rank - 1) + "] for the rank-" +
                                                 std::to_string(rank) + " input; it is " + std::to_string(a.i));
      return;
    case D::kFlattenAxis:
      if (rank >= 0) need(a.i >= -rank && a.i <= rank, "in [" + std::to_string(-rank) + ", " + std::to_string(rank) +
                                                           "]; it is " + std::to_string(a.i));
      return;
    case D::kAxes:
    case D::kUnsqueezeAxes: {
      if (rank < 0) return;
      const int64_t r = d == D::kAxes ? rank : rank + int64_t(a.ints.size());
      std::vector<bool> seen(size_t(std::max<int64_t>(r, 0)), false);
      for (int64_t v : a.ints) {
        need(axis_ok(v, r), "axes in [" + std::to_string(-r) + ", " + std::to_string(r - 1) + "]; it is " + ints_text(a.ints));
        const size_t k = size_t(v < 0 ? v + r : v);
        need(!seen[k], "distinct axes; it names axis " + std::to_string(k) + " twice: " + ints_text(a.ints));
        seen[k] = true;
      }
      return;
    }
    case D::kPerm: {
      if (rank < 0) return;
      std::vector<int64_t> sorted = a.ints;
      std::sort(sorted.begin(), sorted.end());
      bool ok = int64_t(sorted.size()) == rank;
      for (int64_t k = 0; ok && k < rank; ++k) ok = sorted[size_t(k)] == k;
      need(ok, "a permutation of 0.." + std::to_string(rank - 1) + "; it is " + ints_text(a.ints));
      return;
    }
  }
}

}  // namespace

const std::vector<OpRule>& op_rules() {
  static const std::vector<OpRule> rules = make_rules();
  return rules;
}

const OpRule* find_op_rule(const std::string& op) {
  for (const OpRule& r : op_rules())
    if (op == r.op) return &r;
  return nullptr;
}

void check_well_formed(const Node& n, const Graph& g) {
  if (n.outputs.empty() || n.outputs[0].empty()) bad(n, "has no output");
  const OpRule* rule = find_op_rule(n.op);
  if (!rule) return;  // an op without a rule: validate_node rejects it, and inference does not know it either
  for (size_t k = 0; k < rule->inputs.size(); ++k)
    if (!rule->inputs[k].optional && (k >= n.inputs.size() || n.inputs[k].empty()))
      bad(n, std::string("required input '") + rule->inputs[k].name + "' (input " + std::to_string(k) + ") is missing");
  const bool has_input = !n.inputs.empty() && !n.inputs[0].empty();
  const int64_t rank = has_input ? int64_t(g.value(n.inputs[0]).dims.size()) : -1;
  for (const auto& [name, a] : n.attrs) {
    const std::string& key = name;  // a structured binding cannot be captured before C++20 in clang 14
    const auto it = std::find_if(rule->attrs.begin(), rule->attrs.end(), [&](const AttrRule& r) { return key == r.name; });
    if (it == rule->attrs.end() || name.rfind('_', 0) == 0) continue;  // unknown ones: validate_node's business
    if (a.kind != it->kind)
      bad(n, "attribute '" + name + "' must be " + kind_name(it->kind) + "; the model gives " + kind_name(a.kind));
    check_domain(n, name, a, it->domain, rank);
  }
}

// Ops with no DLA layer that the model can write with ops that have one (BUILDER.md).
static std::string rewrite_hint(const std::string& op) {
  if (op == "HardSwish") return "; write it as x * Clip(x + 3, 0, 6) / 6 (Add, Clip, Mul), which runs";
  if (op == "HardSigmoid") return "; write it as Clip(alpha * x + beta, 0, 1) (Mul, Add, Clip), which runs";
  return "";
}

void validate_node(const Node& n, const Graph& g) {
  check_well_formed(n, g);
  const OpRule* rule = find_op_rule(n.op);
  if (!rule)
    bad(n, "operator '" + n.op + "' does not run on the DLA and is not a shape computation the builder can fold" +
               rewrite_hint(n.op));
  // Inputs: each one used as its rule says, none beyond the rule's list (required ones: check_well_formed).
  for (size_t k = 0; k < n.inputs.size(); ++k) {
    if (n.inputs[k].empty()) continue;
    if (rule->inputs.empty() || (k >= rule->inputs.size() && !rule->variadic))
      bad(n, "input " + std::to_string(k) + " ('" + n.inputs[k] + "') is not an input the builder honours for " + n.op);
    const InputRule& in = rule->inputs[std::min(k, rule->inputs.size() - 1)];
    const bool constant = g.is_const(n.inputs[k]);
    if (in.use == InputUse::kConstant && !constant && !rule->fold_only)
      bad(n, std::string("input '") + in.name + "' ('" + n.inputs[k] +
                 "') must be a constant (an initializer or computed from constants) on the DLA; it comes from the "
                 "graph at run time");
    if (in.use == InputUse::kFalseOnly && !is_false_constant(g, n.inputs[k]))
      bad(n, std::string("input '") + in.name + "' must be a constant false: the DLA runs inference only");
  }
  // Outputs beyond the DLA result (MaxPool's Indices, Dropout's mask, BatchNormalization's training
  // statistics): nothing could compute them.
  if (rule->max_outputs >= 0)
    for (size_t k = size_t(rule->max_outputs); k < n.outputs.size(); ++k)
      if (!n.outputs[k].empty())
        bad(n, "output " + std::to_string(k) + " ('" + n.outputs[k] + "') is not computed on the DLA; remove it from the graph");
  // Attributes: each listed one honoured (at the value given, where restricted), none other.
  for (const auto& [name, a] : n.attrs) {
    if (name.rfind('_', 0) == 0) continue;  // the builder's own annotations
    const std::string& key = name;  // a structured binding cannot be captured before C++20 in clang 14
    const auto it = std::find_if(rule->attrs.begin(), rule->attrs.end(), [&](const AttrRule& r) { return key == r.name; });
    if (it == rule->attrs.end()) bad(n, "attribute '" + name + "' is not supported for " + n.op + " (it would be ignored)");
    if (it->only_int && a.i != *it->only_int)
      bad(n, "attribute '" + name + "' = " + std::to_string(a.i) + " is not supported (only " + std::to_string(*it->only_int) + ")");
    if (it->only_str && a.s != *it->only_str)
      bad(n, "attribute '" + name + "' = '" + a.s + "' is not supported (only '" + *it->only_str + "')");
  }
}

std::string op_rules_markdown() {
  auto use_text = [](InputUse u) {
    switch (u) {
      case InputUse::kData: return "";
      case InputUse::kConstant: return " (constant)";
      case InputUse::kFalseOnly: return " (absent or constant false)";
      case InputUse::kUnused: return " (not read)";
    }
    return "";
  };
  std::ostringstream os;
  os << "| ONNX op | DLA | inputs honoured | attributes honoured |\n|---|---|---|---|\n";
  for (const OpRule& r : op_rules()) {
    os << "| `" << r.op << "` | " << r.becomes << " | ";
    for (size_t k = 0; k < r.inputs.size(); ++k)
      os << (k ? ", " : "") << r.inputs[k].name << use_text(r.inputs[k].use) << (r.variadic && k + 1 == r.inputs.size() ? ", ..." : "");
    if (r.inputs.empty()) os << "none";
    os << " | ";
    for (size_t k = 0; k < r.attrs.size(); ++k) {
      const AttrRule& a = r.attrs[k];
      os << (k ? ", " : "") << "`" << a.name << "`";
      if (a.only_int) os << " = " << *a.only_int;
      if (a.only_str) os << " = " << *a.only_str;
      if (*a.note) os << " (" << a.note << ")";
    }
    if (r.attrs.empty()) os << "none";
    os << " |\n";
  }
  return os.str();
}

}  // namespace softdla::builder
