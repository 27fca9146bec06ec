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

Node* Graph::producer_of(const std::string& name) {
  for (Node& n : nodes)
    if (!n.removed && std::find(n.outputs.begin(), n.outputs.end(), name) != n.outputs.end()) return &n;
  return nullptr;
}

}  // namespace softdla::builder
