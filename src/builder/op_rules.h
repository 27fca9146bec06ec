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
  bool optional = false;  // may be absent ("" or past the end); a required input never is
};

// What an attribute's value must be, checked when the node is validated, before any pass reads it, so
// that no pass indexes, divides or allocates with a value a hostile model chose. `rank` is the rank of
// the node's first input.
enum class AttrDomain {
  kAny,              // any value of the attribute's type
  kBool,             // 0 or 1
  kPositive,         // an int >= 1
  kSpatial,          // ints, one per spatial dim (rank - 2), each >= 1: kernel_shape, strides, dilations
  kSpatialNonNeg,    // ints, one per spatial dim, each >= 0: output_padding
  kPads,             // ints, two per spatial dim, each >= 0
  kAxis,             // an int in [-rank, rank - 1]
  kFlattenAxis,      // an int in [-rank, rank]
  kAxes,             // ints, each in [-rank, rank - 1], no axis twice
  kUnsqueezeAxes,    // kAxes over the output's rank (rank + number of axes)
  kPerm,             // a permutation of 0 .. rank - 1
  kFinite,           // a finite float
};

struct AttrRule {
  const char* name;
  Attribute::Kind kind;                // the ONNX type the attribute must have
  AttrDomain domain = AttrDomain::kAny;
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

// Throws Error ("node 'n' (Op): ...") when the node is malformed: no output, a required input missing,
// an attribute of the wrong type or outside its domain (AttrDomain). Shape inference reads only nodes
// that pass this: `check` may infer past a node the DLA cannot run, never past a malformed one.
void check_well_formed(const Node& n, const Graph& g);

// check_well_formed, and throws when the node uses an input, output or attribute its rule does not
// honour, or an op with no rule. Needs the producers of its inputs folded already (constness).
void validate_node(const Node& n, const Graph& g);

// The operator table of docs/BUILDER.md, generated from op_rules().
std::string op_rules_markdown();

}  // namespace softdla::builder
