#include "op_rules.h"

#include <algorithm>
#include <sstream>

#include "error.h"

namespace softdla::builder {
namespace {

using U = InputUse;

// Shorthands keep the table one line per op where possible.
AttrRule A(const char* name, const char* note = "") { return {name, std::nullopt, std::nullopt, note}; }
AttrRule Ai(const char* name, int64_t only, const char* note = "") { return {name, only, std::nullopt, note}; }
AttrRule As(const char* name, const char* only, const char* note = "") { return {name, std::nullopt, std::string(only), note}; }

std::vector<OpRule> make_rules() {
  const std::vector<InputRule> x{{"X", U::kData}};
  const std::vector<InputRule> ab{{"A", U::kData}, {"B", U::kData}};
  const std::vector<AttrRule> conv_attrs{A("auto_pad"), A("dilations"), A("group"), A("kernel_shape"), A("pads"),
                                         A("strides")};
  std::vector<AttrRule> deconv_attrs = conv_attrs;
  deconv_attrs.push_back(A("output_padding", "0 only on the DLA"));
  deconv_attrs.push_back(A("output_shape", "resolved into padding, which must come out 0"));
  const std::vector<AttrRule> reduce_attrs{A("axes"), A("keepdims"), Ai("noop_with_empty_axes", 0)};
  const std::vector<InputRule> reduce_inputs{{"data", U::kData}, {"axes", U::kConstant}};
  const std::vector<InputRule> shape_axes{{"data", U::kData}, {"axes", U::kConstant}};
  const std::vector<InputRule> unary_const{{"input", U::kConstant}};
  return {
      {"Conv", "Conv (BN, bias and activation fused)", {{"X", U::kData}, {"W", U::kConstant}, {"B", U::kConstant}}, conv_attrs},
      {"ConvTranspose", "Deconv", {{"X", U::kData}, {"W", U::kConstant}, {"B", U::kConstant}}, deconv_attrs},
      {"Gemm", "1x1 Conv (or HxW Conv over a flattened 4-D tensor)", {{"A", U::kData}, {"B", U::kConstant}, {"C", U::kConstant}},
       {A("alpha"), A("beta"), Ai("transA", 0), A("transB")}},
      {"MatMul", "1x1 Conv", {{"A", U::kData}, {"B", U::kConstant}}, {}},
      {"Add", "SDP bias / element-wise add", ab, {}},
      {"Sub", "SDP bias / element-wise subtract", ab, {}},
      {"Mul", "SDP scale / element-wise multiply", ab, {}},
      {"Div", "SDP scale by a constant's reciprocal", ab, {}},
      {"Max", "SDP element-wise max", {{"data_0", U::kData}}, {}, 1, true},
      {"Min", "SDP element-wise min", {{"data_0", U::kData}}, {}, 1, true},
      {"Sum", "SDP element-wise adds", {{"data_0", U::kData}}, {}, 1, true},
      {"Neg", "SDP scale by -1", x, {}},
      {"MaxPool", "Pool (max)", x,
       {A("auto_pad"), A("ceil_mode"), A("dilations", "1 only"), A("kernel_shape"), A("pads"),
        A("storage_order", "affects only the Indices output, which is rejected"), A("strides")}},
      {"AveragePool", "Pool (average)", x,
       {A("auto_pad"), A("ceil_mode"), A("count_include_pad"), A("dilations", "1 only"), A("kernel_shape"), A("pads"),
        A("strides")}},
      {"GlobalAveragePool", "chain of average pools (windows <= 8)", x, {}},
      {"GlobalMaxPool", "ReduceMax over H, W", x, {}},
      {"ReduceMean", "average pools (H, W) or a 1x1 Conv (C)", reduce_inputs, reduce_attrs},
      {"ReduceMax", "ReduceMax", reduce_inputs, reduce_attrs},
      {"ReduceSum", "the ReduceMean lowering scaled by the element count", reduce_inputs, reduce_attrs},
      {"Reshape", "nothing, or a Shuffle", {{"data", U::kData}, {"shape", U::kConstant}}, {A("allowzero")}},
      {"Flatten", "nothing, or a Shuffle", {{"input", U::kData}}, {A("axis")}},
      {"Squeeze", "nothing, or a Shuffle", shape_axes, {A("axes")}},
      {"Unsqueeze", "nothing, or a Shuffle", shape_axes, {A("axes")}},
      {"Transpose", "Shuffle", {{"data", U::kData}}, {A("perm")}},
      {"Identity", "nothing", {{"input", U::kData}}, {}},
      {"Dropout", "nothing (inference)", {{"data", U::kData}, {"ratio", U::kUnused}, {"training_mode", U::kFalseOnly}},
       {A("seed", "unused in inference"), A("ratio", "unused in inference")}},
      {"Resize", "Resize (nearest or bilinear, integer factors)",
       {{"X", U::kData}, {"roi", U::kUnused}, {"scales", U::kConstant}, {"sizes", U::kConstant}},
       {Ai("antialias", 0), A("coordinate_transformation_mode"), A("cubic_coeff_a", "cubic mode is rejected"),
        Ai("exclude_outside", 0), A("extrapolation_value", "tf_crop_and_resize is rejected"),
        As("keep_aspect_ratio_policy", "stretch"), A("mode"), A("nearest_mode")}},
      {"Upsample", "Resize", {{"X", U::kData}, {"scales", U::kConstant}}, {A("mode")}},
      {"Split", "Slices", {{"input", U::kData}, {"split", U::kConstant}}, {A("axis"), A("split"), A("num_outputs")}, -1},
      {"Slice", "Slice (steps 1)",
       {{"data", U::kData}, {"starts", U::kConstant}, {"ends", U::kConstant}, {"axes", U::kConstant}, {"steps", U::kConstant}},
       {}},
      {"Concat", "Concat (channels); one input: nothing", {{"inputs", U::kData}}, {A("axis")}, 1, true},
      {"Softmax", "Softmax", {{"input", U::kData}}, {A("axis")}},
      {"LRN", "Lrn", x, {A("alpha"), A("beta"), A("bias"), A("size")}},
      {"Abs", "Unary", x, {}},
      {"BatchNormalization", "SDP scale + bias, or folded into the Conv before it",
       {{"X", U::kData}, {"scale", U::kConstant}, {"B", U::kConstant}, {"input_mean", U::kConstant},
        {"input_var", U::kConstant}},
       {A("epsilon"), A("momentum", "unused in inference"), Ai("training_mode", 0)}},
      {"Relu", "SDP ReLU", x, {}},
      {"LeakyRelu", "SDP PReLU", x, {A("alpha")}},
      {"PRelu", "SDP PReLU (per channel or one slope)", {{"X", U::kData}, {"slope", U::kConstant}}, {}},
      {"Clip", "SDP clip", {{"input", U::kData}, {"min", U::kConstant}, {"max", U::kConstant}}, {}},
      {"Sigmoid", "SDP sigmoid", x, {}},
      {"Tanh", "SDP tanh", x, {}},
      {"QuantizeLinear", "nothing: a Q/DQ pair on an activation sets its INT8 scale",
       {{"x", U::kData}, {"y_scale", U::kConstant}, {"y_zero_point", U::kConstant}},
       {A("axis"), A("saturate"), Ai("block_size", 0)}},
      {"DequantizeLinear", "folded into constant weights, or the second half of a Q/DQ pair",
       {{"x", U::kData}, {"x_scale", U::kConstant}, {"x_zero_point", U::kConstant}}, {A("axis"), Ai("block_size", 0)}},
      // Shape arithmetic: evaluated at build time, never on the DLA.
      {"Constant", "folded", {}, {A("value"), A("value_float"), A("value_int"), A("value_ints")}, 1, false, true},
      {"Shape", "folded", {{"data", U::kData}}, {A("start"), A("end")}, 1, false, true},
      {"Gather", "folded", {{"data", U::kConstant}, {"indices", U::kConstant}}, {A("axis")}, 1, false, true},
      {"Cast", "folded", unary_const, {A("to")}, 1, false, true},
      {"ConstantOfShape", "folded", unary_const, {A("value")}, 1, false, true},
      {"Range", "folded", {{"start", U::kConstant}, {"limit", U::kConstant}, {"delta", U::kConstant}}, {}, 1, false, true},
      {"Floor", "folded", unary_const, {}, 1, false, true},
      {"Ceil", "folded", unary_const, {}, 1, false, true},
      {"Sqrt", "folded", unary_const, {}, 1, false, true},
      {"Reciprocal", "folded", unary_const, {}, 1, false, true},
      {"Pow", "folded", {{"X", U::kConstant}, {"Y", U::kConstant}}, {}, 1, false, true},
      {"ReduceProd", "folded (over all axes)", {{"data", U::kConstant}, {"axes", U::kConstant}}, {A("axes"), A("keepdims")}, 1,
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

void validate_node(const Node& n, const Graph& g) {
  const OpRule* rule = find_op_rule(n.op);
  if (!rule) bad(n, "operator '" + n.op + "' does not run on the DLA and is not a shape computation the builder can fold");
  // Inputs: each one used as its rule says, none beyond the rule's list.
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
    const auto it = std::find_if(rule->attrs.begin(), rule->attrs.end(), [&](const AttrRule& r) { return name == r.name; });
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
