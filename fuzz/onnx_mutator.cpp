// Structure-aware mutation for the ONNX fuzz target. Byte flips mostly break the protobuf framing and
// never get past the parser; this mutator parses the model, changes one thing a hostile or careless
// exporter could produce (a dim, an attribute value or type, an initializer's dims or data, an opset,
// an op type, a wiring, a node's presence), and serializes it again. Unparsable inputs fall back to
// libFuzzer's byte mutation.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "onnx/onnx_pb.h"
#include "op_rules.h"

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t max_size);

namespace {

using Rng = std::minstd_rand;

template <class T>
size_t pick(Rng& r, const T& container) { return size_t(r() % uint32_t(container.size())); }

// Values at the edges of every range the builder computes with.
int64_t interesting_int(Rng& r) {
  static const int64_t values[] = {-1, 0, 1, 2, 3, 4, 7, 8, 16, 31, 32, 255, 8192, 8193, 65535, 65536,
                                   int64_t(1) << 31, (int64_t(1) << 31) - 1, int64_t(1) << 32, int64_t(1) << 62,
                                   std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min(),
                                   -2, -3, -8193};
  if (r() % 4 == 0) return int64_t(r() % 64) - 8;
  return values[r() % (sizeof values / sizeof values[0])];
}

float interesting_float(Rng& r) {
  static const float values[] = {0.f, -0.f, 1.f, -1.f, 0.5f, 1e-45f, 1e-30f, 1e30f, 3.4e38f, -3.4e38f,
                                 std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                                 std::numeric_limits<float>::quiet_NaN(), 65504.f, 65536.f, 127.f, 128.f};
  if (r() % 4 == 0) return float(int(r() % 2001) - 1000) / 100.f;
  return values[r() % (sizeof values / sizeof values[0])];
}

// The name of some value of the graph: a node output or a graph input ("y" when there is none).
std::string some_value(const onnx::GraphProto& g, Rng& r) {
  if (g.node_size() && r() % 3) {
    const onnx::NodeProto& n = g.node(int(pick(r, g.node())));
    if (n.output_size()) return n.output(int(pick(r, n.output())));
  }
  if (g.input_size()) return g.input(int(pick(r, g.input()))).name();
  return "y";
}

onnx::TensorShapeProto* shape_of(onnx::ValueInfoProto* v) {
  if (!v->type().has_tensor_type()) return nullptr;
  return v->mutable_type()->mutable_tensor_type()->mutable_shape();
}

void mutate_value_info(onnx::GraphProto& g, Rng& r) {
  const int total = g.input_size() + g.output_size() + g.value_info_size();
  if (total == 0) return;
  int i = int(r() % uint32_t(total));
  onnx::ValueInfoProto* v = i < g.input_size() ? g.mutable_input(i)
                            : (i -= g.input_size()) < g.output_size() ? g.mutable_output(i)
                                                                        : g.mutable_value_info(i - g.output_size());
  switch (r() % 4) {
    case 0:
    case 1: {
      onnx::TensorShapeProto* s = shape_of(v);
      if (!s) return;
      if (s->dim_size() == 0 || r() % 4 == 0) s->add_dim()->set_dim_value(interesting_int(r));
      else if (r() % 5 == 0) s->mutable_dim()->RemoveLast();
      else if (r() % 5 == 0) s->mutable_dim(int(pick(r, s->dim())))->set_dim_param("N");
      else s->mutable_dim(int(pick(r, s->dim())))->set_dim_value(interesting_int(r));
      return;
    }
    case 2:
      v->mutable_type()->mutable_tensor_type()->set_elem_type(int32_t(r() % 24));
      return;
    default:
      v->set_name(r() % 2 ? some_value(g, r) : std::string("renamed"));
  }
}

void set_random_attribute_value(onnx::AttributeProto& a, Rng& r) {
  switch (r() % 5) {
    case 0:
      a.set_type(onnx::AttributeProto::INT);
      a.set_i(interesting_int(r));
      return;
    case 1: {
      a.set_type(onnx::AttributeProto::INTS);
      if (a.ints_size() == 0 || r() % 3 == 0) a.add_ints(interesting_int(r));
      else if (r() % 3 == 0) a.mutable_ints()->RemoveLast();
      else a.set_ints(int(pick(r, a.ints())), interesting_int(r));
      return;
    }
    case 2:
      a.set_type(onnx::AttributeProto::FLOAT);
      a.set_f(interesting_float(r));
      return;
    case 3:
      a.set_type(onnx::AttributeProto::FLOATS);
      a.add_floats(interesting_float(r));
      return;
    default: {
      static const char* strings[] = {"NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID", "DCR", "CRD", "nearest",
                                      "linear", "cubic", "asymmetric", "half_pixel", "align_corners", ""};
      a.set_type(onnx::AttributeProto::STRING);
      a.set_s(strings[r() % (sizeof strings / sizeof strings[0])]);
    }
  }
}

void mutate_attribute(onnx::GraphProto& g, Rng& r) {
  if (g.node_size() == 0) return;
  onnx::NodeProto* n = g.mutable_node(int(pick(r, g.node())));
  if (n->attribute_size() == 0 || r() % 3 == 0) {
    // Add an attribute this op honours (or one it does not), with a value chosen at random.
    const auto* rule = softdla::builder::find_op_rule(n->op_type());
    onnx::AttributeProto* a = n->add_attribute();
    a->set_name(rule && !rule->attrs.empty() && r() % 4 ? rule->attrs[pick(r, rule->attrs)].name : "bogus");
    set_random_attribute_value(*a, r);
    return;
  }
  onnx::AttributeProto* a = n->mutable_attribute(int(pick(r, n->attribute())));
  if (r() % 4 == 0) {
    set_random_attribute_value(*a, r);  // possibly a different type than the op expects
    return;
  }
  switch (a->type()) {
    case onnx::AttributeProto::INT: a->set_i(interesting_int(r)); break;
    case onnx::AttributeProto::FLOAT: a->set_f(interesting_float(r)); break;
    case onnx::AttributeProto::INTS:
      if (a->ints_size() && r() % 4) a->set_ints(int(pick(r, a->ints())), interesting_int(r));
      else if (a->ints_size() && r() % 2) a->mutable_ints()->RemoveLast();
      else a->add_ints(interesting_int(r));
      break;
    case onnx::AttributeProto::FLOATS:
      if (a->floats_size()) a->set_floats(int(pick(r, a->floats())), interesting_float(r));
      else a->add_floats(interesting_float(r));
      break;
    default: set_random_attribute_value(*a, r);
  }
}

void mutate_initializer(onnx::GraphProto& g, Rng& r) {
  if (g.initializer_size() == 0) return;
  onnx::TensorProto* t = g.mutable_initializer(int(pick(r, g.initializer())));
  switch (r() % 5) {
    case 0:
      if (t->dims_size()) t->set_dims(int(pick(r, t->dims())), interesting_int(r));
      else t->add_dims(interesting_int(r));
      return;
    case 1:
      if (t->dims_size() && r() % 2) t->mutable_dims()->RemoveLast();
      else t->add_dims(interesting_int(r));
      return;
    case 2:
      t->set_data_type(int32_t(r() % 24));
      return;
    case 3: {  // truncate or extend the payload
      std::string* raw = t->mutable_raw_data();
      if (!raw->empty() && r() % 2) raw->resize(r() % raw->size());
      else raw->append(size_t(1 + r() % 64), char(r()));
      return;
    }
    default: {  // one value becomes NaN, inf or huge
      std::string* raw = t->mutable_raw_data();
      const float v = interesting_float(r);
      if (raw->size() >= 4) std::memcpy(raw->data() + (r() % (raw->size() / 4)) * 4, &v, 4);
      else if (t->float_data_size()) t->set_float_data(int(pick(r, t->float_data())), v);
      else if (t->int64_data_size()) t->set_int64_data(int(pick(r, t->int64_data())), interesting_int(r));
    }
  }
}

void mutate_node(onnx::GraphProto& g, Rng& r) {
  if (g.node_size() == 0) return;
  const int i = int(pick(r, g.node()));
  onnx::NodeProto* n = g.mutable_node(i);
  switch (r() % 6) {
    case 0: {  // another op type, keeping the wiring and attributes
      const auto& rules = softdla::builder::op_rules();
      n->set_op_type(rules[pick(r, rules)].op);
      return;
    }
    case 1: {  // rewire one input to another value of the graph (possibly creating a cycle)
      if (n->input_size() == 0) return;
      n->set_input(int(pick(r, n->input())), r() % 8 ? some_value(g, r) : std::string("missing"));
      return;
    }
    case 2:
      if (n->input_size() && r() % 2) n->mutable_input()->RemoveLast();
      else n->add_input(r() % 2 ? std::string() : some_value(g, r));
      return;
    case 3:
      if (n->output_size() && r() % 2) n->mutable_output()->RemoveLast();
      else n->add_output(r() % 2 ? std::string() : some_value(g, r));
      return;
    case 4:  // drop the node: its consumers lose their producer
      g.mutable_node()->DeleteSubrange(i, 1);
      return;
    default:  // duplicate it: two producers of one value
      *g.add_node() = *n;
  }
}

void mutate_model(onnx::ModelProto& m, Rng& r) {
  onnx::GraphProto& g = *m.mutable_graph();
  switch (r() % 10) {
    case 0:
    case 1: mutate_value_info(g, r); break;
    case 2:
    case 3:
    case 4: mutate_attribute(g, r); break;
    case 5:
    case 6: mutate_initializer(g, r); break;
    case 7:
    case 8: mutate_node(g, r); break;
    default:
      if (m.opset_import_size() == 0) m.add_opset_import()->set_version(interesting_int(r));
      else m.mutable_opset_import(0)->set_version(r() % 2 ? int64_t(r() % 30) : interesting_int(r));
  }
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned int seed) {
  Rng r(seed);
  onnx::ModelProto m;
  if (r() % 8 == 0 || !m.ParseFromArray(data, int(size)) || !m.has_graph())
    return LLVMFuzzerMutate(data, size, max_size);
  for (int k = 1 + int(r() % 3); k > 0; --k) mutate_model(m, r);
  const std::string out = m.SerializeAsString();
  if (out.size() > max_size) return LLVMFuzzerMutate(data, size, max_size);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}
