#include "ir.h"

#include <algorithm>

#include "error.h"

namespace softdla::builder {

int64_t Node::get_int(const std::string& a, int64_t def) const {
  auto it = attrs.find(a);
  return it == attrs.end() ? def : it->second.i;
}
double Node::get_float(const std::string& a, double def) const {
  auto it = attrs.find(a);
  return it == attrs.end() ? def : it->second.f;
}
std::string Node::get_string(const std::string& a, const std::string& def) const {
  auto it = attrs.find(a);
  return it == attrs.end() ? def : it->second.s;
}
std::vector<int64_t> Node::get_ints(const std::string& a, std::vector<int64_t> def) const {
  auto it = attrs.find(a);
  return it == attrs.end() ? def : it->second.ints;
}

void check_tensor_size(const std::string& what, const std::vector<int64_t>& dims) {
  for (int64_t d : dims)
    if (d < 0 || d > kMaxTensorElements)
      fail(what, " has dimension ", d, "; dimensions must be between 0 and ", kMaxTensorElements);
  if (checked_product<int64_t>(dims, what) > kMaxTensorElements)
    fail(what, " has ", checked_product<int64_t>(dims, what), " elements, more than the builder's limit of ",
         kMaxTensorElements);
}

bool is_float_type(int32_t t) { return t == 1 || t == 10 || t == 11 || t == 16; }

std::string type_name(int32_t t) {
  static const char* const names[] = {"undefined", "float32", "uint8", "int8", "uint16", "int16", "int32", "int64",
                                      "string", "bool", "float16", "float64", "uint32", "uint64", "complex64",
                                      "complex128", "bfloat16", "float8e4m3fn", "float8e4m3fnuz", "float8e5m2",
                                      "float8e5m2fnuz", "uint4", "int4", "float4e2m1", "float8e8m0", "uint2", "int2"};
  if (t >= 0 && size_t(t) < std::size(names)) return names[t];
  return "data type " + std::to_string(t);
}

Value& Graph::value(const std::string& name) {
  auto it = values.find(name);
  if (it == values.end()) fail("internal: unknown value '", name, "'");
  return it->second;
}
const Value& Graph::value(const std::string& name) const {
  auto it = values.find(name);
  if (it == values.end()) fail("internal: unknown value '", name, "'");
  return it->second;
}

std::vector<Node*> Graph::consumers(const std::string& name) {
  std::vector<Node*> out;
  for (Node& n : nodes)
    if (!n.removed && std::find(n.inputs.begin(), n.inputs.end(), name) != n.inputs.end()) out.push_back(&n);
  return out;
}

const Node* Graph::producer_of_any(const std::string& name) const {
  for (const Node& n : nodes)
    if (std::find(n.outputs.begin(), n.outputs.end(), name) != n.outputs.end()) return &n;
  return nullptr;
}

Node* Graph::producer_of(const std::string& name) {
  for (Node& n : nodes)
    if (!n.removed && std::find(n.outputs.begin(), n.outputs.end(), name) != n.outputs.end()) return &n;
  return nullptr;
}

}  // namespace softdla::builder
