// The contract of every ONNX op the builder accepts: which inputs and attributes it honours, which it
// needs constant, which it accepts only at a value the DLA computes. A node that uses anything else is
// rejected with a message naming the node, the input or attribute and the fix, before any pass touches
// it, so no input or attribute is ever silently ignored. docs/BUILDER.md's operator table is generated
// from this table (`softdla ops --markdown`).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "ir.h"

namespace softdla::builder {

// The newest default-domain opset the tables were checked against (ONNX 1.23). Ops whose newer versions
// only widened their types or added attributes/inputs are covered: new attributes and inputs are not in
// the tables, so a model that uses them is rejected by name instead of being misread.
constexpr int64_t kMinOpset = 11, kMaxOpset = 28;

enum class InputUse {
  kData,       // a tensor the DLA reads (or a constant folded into weights)
  kConstant,   // must be a constant (initializer or folded); its values are honoured
  kFalseOnly,  // must be absent or a constant false (e.g. Dropout's training_mode)
  kUnused,     // read by ONNX only in modes the builder rejects (e.g. Resize's roi)
};

struct InputRule {
  const char* name;
  InputUse use;
};

struct AttrRule {
  const char* name;
  std::optional<int64_t> only_int;     // honoured only at this value
  std::optional<std::string> only_str;  // honoured only at this value
  const char* note = "";               // how the value is honoured, for the docs
};

struct OpRule {
  const char* op;
  const char* becomes;                 // what the DLA runs, for the docs
  std::vector<InputRule> inputs;       // in ONNX order; more inputs than listed are rejected
  std::vector<AttrRule> attrs;         // any attribute not listed is rejected
  int max_outputs = 1;                 // further non-empty outputs are rejected; -1: any number
  bool variadic = false;               // the last input rule repeats (Concat, Sum, Max, Min)
  bool fold_only = false;              // runs only when folded (all inputs constant)
};

const std::vector<OpRule>& op_rules();
const OpRule* find_op_rule(const std::string& op);

// Throws Error ("node 'n' (Op): ...") when the node uses an input, output or attribute its rule does
// not honour, or an op with no rule. Needs the producers of its inputs folded already (constness).
void validate_node(const Node& n, const Graph& g);

// The operator table of docs/BUILDER.md, generated from op_rules().
std::string op_rules_markdown();

}  // namespace softdla::builder
