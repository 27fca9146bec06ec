// The builder's graph IR: an ONNX graph after import, with static shapes and constant values. Tensor
// names are the ONNX value names; passes rewrite nodes in place.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "checked.h"

namespace softdla::builder {

// The largest tensor the builder handles, in elements and per dimension (the DLA's own limits are far
// smaller; weights of the largest classifiers are ~10^8). Every shape entering the graph — inputs,
// initializers, declared and inferred shapes — is checked against it, so shape arithmetic on two dims
// cannot overflow int64.
constexpr int64_t kMaxTensorElements = int64_t(1) << 31;

// Throws Error naming `what` when a dim is negative or above kMaxTensorElements, or their product is.
void check_tensor_size(const std::string& what, const std::vector<int64_t>& dims);

// A constant's values, kept as doubles for floats and as int64 for integer/bool tensors.
struct ConstData {
  bool is_float = true;
  std::vector<double> f;
  std::vector<int64_t> i;
  size_t size() const { return is_float ? f.size() : i.size(); }
  // Bounds-checked: a constant with fewer values than an op needs (an empty Clip bound, a one-value
  // tensor that is empty) is an error, not a read past the end.
  double at(size_t k) const {
    need(k);
    return is_float ? f[k] : double(i[k]);
  }
  // An integer use of a float constant (a shape, an axis, an index): NaN, infinities and values beyond
  // int64 are errors, not undefined conversions.
  int64_t int_at(size_t k) const {
    need(k);
    return is_float ? checked_int<int64_t>(f[k], "an integer taken from a float constant") : i[k];
  }
  void need(size_t k) const {
    if (k >= size()) fail("a constant has ", size(), " values where at least ", k + 1, " are needed");
  }
};

struct Value {
  std::string name;
  std::vector<int64_t> dims;  // static; empty for scalars
  int32_t elem_type = 1;      // ONNX TensorProto.DataType (1 float, 7 int64, 10 float16, ...)
  std::optional<ConstData> constant;
  bool known_shape = false;
  // The element count; negative dims and products beyond int64 are errors naming the value.
  int64_t count() const { return checked_product<int64_t>(dims, "the shape of '" + name + "'"); }
};

struct Attribute {
  enum Kind { kNone, kInt, kFloat, kString, kInts, kFloats, kTensor } kind = kNone;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::optional<Value> tensor;
};

struct Node {
  std::string name, op;
  std::vector<std::string> inputs;   // "" for an omitted optional input
  std::vector<std::string> outputs;
  std::map<std::string, Attribute> attrs;
  bool removed = false;
  // `check` only: an earlier stage recorded why this node cannot be built. Later stages skip it (its
  // attributes may be exactly what made it fail) and keep going with the shapes the model declares.
  bool unsupported = false;

  bool has(const std::string& a) const { return attrs.count(a) > 0; }
  int64_t get_int(const std::string& a, int64_t def) const;
  double get_float(const std::string& a, double def) const;
  std::string get_string(const std::string& a, const std::string& def) const;
  std::vector<int64_t> get_ints(const std::string& a, std::vector<int64_t> def = {}) const;
  std::string label() const { return name.empty() ? op + " (unnamed)" : name; }
};

struct Graph {
  std::vector<Node> nodes;  // topological order after import
  std::map<std::string, Value> values;
  std::vector<std::string> inputs, outputs;
  int64_t opset = 0;
  std::string producer;
  // Fully static shapes the model states for its values (value_info, graph outputs): checked against
  // what the builder infers, and used by `check` past nodes it cannot infer.
  std::map<std::string, std::vector<int64_t>> declared;
  bool shapes_fixed = false;  // --shapes set an input's dynamic dimensions (declarations may predate them)

  Value& value(const std::string& name);
  const Value& value(const std::string& name) const;
  bool is_const(const std::string& name) const {
    auto it = values.find(name);
    return it != values.end() && it->second.constant.has_value();
  }
  // Nodes reading a value (not removed).
  std::vector<Node*> consumers(const std::string& name);
  Node* producer_of(const std::string& name);
  const Node* producer_of_any(const std::string& name) const;  // folded (removed) nodes too
};

// ONNX TensorProto.DataType helpers: floating-point types (what the DLA computes on) and the names
// users know ("int64", not "data type 7").
bool is_float_type(int32_t onnx_type);
std::string type_name(int32_t onnx_type);

// A convolution's weight dims as its 2-D form reads them: 1-D weights [K, C/group, k] are [K, C/group, 1, k]
// (the same bytes; the node runs over [N, C, 1, T]).
inline std::vector<int64_t> conv_weight_dims(std::vector<int64_t> d) {
  if (d.size() == 3) d.insert(d.begin() + 2, 1);
  return d;
}

// A shape as messages print it: [1, 3, 224, 224].
inline std::string dims_text(const std::vector<int64_t>& d) {
  std::string s = "[";
  for (size_t k = 0; k < d.size(); ++k) s += (k ? ", " : "") + std::to_string(d[k]);
  return s + "]";
}

// Parses and checks an ONNX model (protobuf bytes): opset 11-21, static shapes, acyclic graph. Throws
// Error with a message naming the problem.
// `shapes` fixes input shapes (trtexec's --shapes), for models exported with dynamic dimensions.
Graph import_onnx(const std::vector<uint8_t>& bytes,
                  const std::map<std::string, std::vector<int64_t>>& shapes = {});

// A node the builder cannot handle, and why.
struct NodeIssue {
  std::string node, op, message;
};

// Infers shapes of every value and folds nodes whose inputs are all constant (shape arithmetic,
// Reshape/Transpose/Cast of constants, Q/DQ weights, ...). With `issues`, problems are collected per
// node and the rest of the graph is still inferred; without, the first problem throws Error.
void infer_and_fold(Graph& g, std::vector<NodeIssue>* issues = nullptr);

}  // namespace softdla::builder
