// ONNX protobuf -> IR. Everything a malformed file can get wrong is reported as Error with the
// offending node/tensor named: truncated bytes, unsupported opset, dynamic shapes, missing inputs,
// cycles, external data, tensors whose data does not match their shape.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include "error.h"
#include "ir.h"
#include "numerics.h"
#include "op_rules.h"
#include "onnx/onnx_pb.h"

namespace softdla::builder {
namespace {


uint16_t load_u16(const std::string& raw, size_t k) {
  uint16_t v;
  std::memcpy(&v, raw.data() + 2 * k, 2);
  return v;
}

// fp16 through the engine's exact conversion; bf16 is the top half of an fp32.
double half_bits_to_double(uint16_t h, bool bf16) {
  if (!bf16) return num::half_to_float(h);
  const uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Converts a TensorProto into a constant Value (dims, type, values).
Value tensor_value(const onnx::TensorProto& t, const std::string& name) {
  Value v;
  v.name = name;
  v.elem_type = t.data_type();
  v.known_shape = true;
  v.dims.assign(t.dims().begin(), t.dims().end());
  check_tensor_size("tensor '" + name + "'", v.dims);
  const int64_t count = v.count();
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    fail("tensor '", name, "' keeps its data in an external file; save the model with all tensors embedded "
         "(onnx.save(model, path, save_as_external_data=False))");
  ConstData c;
  const std::string& raw = t.raw_data();
  const bool has_raw = t.has_raw_data();
  auto need = [&](size_t have, size_t elem) {
    if (have != size_t(count) * elem)
      fail("tensor '", name, "' holds ", have / std::max<size_t>(elem, 1), " values but its shape needs ", count);
  };
  switch (t.data_type()) {
    case onnx::TensorProto::FLOAT:
      if (has_raw) {
        need(raw.size(), 4);
        for (int64_t k = 0; k < count; ++k) {
          float f;
          std::memcpy(&f, raw.data() + 4 * k, 4);
          c.f.push_back(f);
        }
      } else {
        need(size_t(t.float_data_size()), 1);
        c.f.assign(t.float_data().begin(), t.float_data().end());
      }
      break;
    case onnx::TensorProto::DOUBLE:
      if (has_raw) {
        need(raw.size(), 8);
        c.f.resize(size_t(count));
        if (!raw.empty()) std::memcpy(c.f.data(), raw.data(), raw.size());
      } else {
        need(size_t(t.double_data_size()), 1);
        c.f.assign(t.double_data().begin(), t.double_data().end());
      }
      break;
    case onnx::TensorProto::FLOAT16:
    case onnx::TensorProto::BFLOAT16: {
      const bool bf = t.data_type() == onnx::TensorProto::BFLOAT16;
      if (has_raw) {
        need(raw.size(), 2);
        for (int64_t k = 0; k < count; ++k) c.f.push_back(half_bits_to_double(load_u16(raw, size_t(k)), bf));
      } else {
        need(size_t(t.int32_data_size()), 1);
        for (int32_t b : t.int32_data()) c.f.push_back(half_bits_to_double(uint16_t(b), bf));
      }
      break;
    }
    case onnx::TensorProto::INT64:
      c.is_float = false;
      if (has_raw) {
        need(raw.size(), 8);
        c.i.resize(size_t(count));
        if (!raw.empty()) std::memcpy(c.i.data(), raw.data(), raw.size());
      } else {
        need(size_t(t.int64_data_size()), 1);
        c.i.assign(t.int64_data().begin(), t.int64_data().end());
      }
      break;
    case onnx::TensorProto::INT32:
    case onnx::TensorProto::INT16:
    case onnx::TensorProto::INT8:
    case onnx::TensorProto::UINT8:
    case onnx::TensorProto::UINT16:
    case onnx::TensorProto::BOOL: {
      c.is_float = false;
      const int type = t.data_type();
      const size_t elem = type == onnx::TensorProto::INT32 ? 4 : (type == onnx::TensorProto::INT16 || type == onnx::TensorProto::UINT16) ? 2 : 1;
      if (has_raw) {
        need(raw.size(), elem);
        for (int64_t k = 0; k < count; ++k) {
          const char* p = raw.data() + size_t(k) * elem;
          int64_t v = 0;
          if (type == onnx::TensorProto::INT32) { int32_t x; std::memcpy(&x, p, 4); v = x; }
          else if (type == onnx::TensorProto::INT16) { int16_t x; std::memcpy(&x, p, 2); v = x; }
          else if (type == onnx::TensorProto::UINT16) { uint16_t x; std::memcpy(&x, p, 2); v = x; }
          else if (type == onnx::TensorProto::INT8) v = int8_t(*p);
          else v = uint8_t(*p);
          c.i.push_back(v);
        }
      } else {
        need(size_t(t.int32_data_size()), 1);
        c.i.assign(t.int32_data().begin(), t.int32_data().end());
      }
      break;
    }
    default:
      fail("tensor '", name, "' holds ", type_name(t.data_type()), " values, which the builder does not read "
           "(float32/16/64, bfloat16 and integer types are read)");
  }
  v.constant = std::move(c);
  return v;
}

Attribute read_attribute(const onnx::AttributeProto& a, const std::string& node) {
  Attribute r;
  switch (a.type()) {
    case onnx::AttributeProto::INT: r.kind = Attribute::kInt; r.i = a.i(); break;
    case onnx::AttributeProto::FLOAT: r.kind = Attribute::kFloat; r.f = a.f(); break;
    case onnx::AttributeProto::STRING: r.kind = Attribute::kString; r.s = a.s(); break;
    case onnx::AttributeProto::INTS: r.kind = Attribute::kInts; r.ints.assign(a.ints().begin(), a.ints().end()); break;
    case onnx::AttributeProto::FLOATS: r.kind = Attribute::kFloats; r.floats.assign(a.floats().begin(), a.floats().end()); break;
    case onnx::AttributeProto::TENSOR: r.kind = Attribute::kTensor; r.tensor = tensor_value(a.t(), node + "." + a.name()); break;
    default: r.kind = Attribute::kNone; break;  // graphs, sparse tensors: nodes using them are unsupported anyway
  }
  return r;
}

}  // namespace

Graph import_onnx(const std::vector<uint8_t>& bytes, const std::map<std::string, std::vector<int64_t>>& shapes) {
  onnx::ModelProto model;
  if (bytes.empty() || bytes.size() > size_t(INT32_MAX) || !model.ParseFromArray(bytes.data(), int(bytes.size())))
    fail("not a valid ONNX model (protobuf parsing failed: truncated or not an .onnx file)");
  Graph g;
  g.producer = model.producer_name();
  for (const auto& op : model.opset_import())
    if (op.domain().empty() || op.domain() == "ai.onnx") g.opset = op.version();
  if (g.opset == 0) fail("the model declares no default-domain opset");
  if (g.opset < kMinOpset || g.opset > kMaxOpset)
    fail("opset ", g.opset, " is not supported (opsets ", kMinOpset, "-", kMaxOpset,
         "); convert with onnx.version_converter.convert_version(model, ", kMaxOpset, ")");
  const onnx::GraphProto& gp = model.graph();

  for (const auto& init : gp.initializer()) {
    if (init.name().empty()) fail("an initializer has no name");
    try {
      g.values[init.name()] = tensor_value(init, init.name());
    } catch (const Error& e) {
      // Name the node that reads it: that is what the user looks up in the model.
      for (const auto& np : gp.node())
        if (std::count(np.input().begin(), np.input().end(), init.name()))
          fail("node '", np.name().empty() ? np.op_type() : np.name(), "' (", np.op_type(), "): ", e.what());
      throw;
    }
  }
  for (const auto& in : gp.input()) {
    if (g.values.count(in.name())) continue;  // an initializer listed as input (old exporters)
    Value v;
    v.name = in.name();
    if (!in.type().has_tensor_type()) fail("input '", in.name(), "' is not a tensor");
    const auto& tt = in.type().tensor_type();
    v.elem_type = tt.elem_type();
    if (v.elem_type != 1 && v.elem_type != 10)
      fail("input '", in.name(), "' is ", type_name(v.elem_type), "; DLA inputs are float32 or float16 tensors (the loadable's "
           "I/O formats then say how they are stored: int8 or fp16)");
    if (auto fixed = shapes.find(in.name()); fixed != shapes.end()) {
      if (tt.has_shape() && tt.shape().dim_size() != int(fixed->second.size()))
        fail("--shapes gives ", fixed->second.size(), " dims for input '", in.name(), "', which has ", tt.shape().dim_size());
      for (int64_t d : fixed->second)
        if (d <= 0) fail("--shapes: dimensions of '", in.name(), "' must be positive");
      // A dimension the model fixes stays as it is: the graph's constants (reshape targets, weights) were
      // exported for it, and trtexec does not take --shapes for it either.
      for (int k = 0; tt.has_shape() && k < tt.shape().dim_size(); ++k) {
        const auto& dim = tt.shape().dim(k);
        if (dim.has_dim_value() && dim.dim_value() > 0 && dim.dim_value() != fixed->second[size_t(k)])
          fail("--shapes gives input '", in.name(), "' ", dims_text(fixed->second), ", but the model fixes its dimension ",
               k, " at ", dim.dim_value(), ": only dynamic dimensions (a dim_param, or none) can be set; give the "
               "model's own size there, or export the model with that axis dynamic");
      }
      bool dynamic = !tt.has_shape();
      for (int k = 0; tt.has_shape() && k < tt.shape().dim_size(); ++k)
        dynamic = dynamic || !(tt.shape().dim(k).has_dim_value() && tt.shape().dim(k).dim_value() > 0);
      v.dims = fixed->second;
      g.shapes_fixed = g.shapes_fixed || dynamic;  // --shapes set a dimension the model left open
      check_tensor_size("--shapes for input '" + in.name() + "'", v.dims);
      v.known_shape = true;
      g.inputs.push_back(v.name);
      g.values[v.name] = v;
      continue;
    }
    if (!tt.has_shape()) fail("input '", in.name(), "' has no shape; DLA loadables need static shapes");
    for (const auto& d : tt.shape().dim()) {
      if (d.has_dim_value() && d.dim_value() == 0)
        fail("input '", in.name(), "' has a dimension of size 0: the DLA has no empty tensors");
      if (!d.has_dim_value() || d.dim_value() <= 0)
        fail("input '", in.name(), "' has a dynamic dimension",
             d.has_dim_param() ? " '" + d.dim_param() + "'" : std::string(),
             ": DLA loadables need static shapes; fix it with --shapes=", in.name(), ":1x3x224x224 (your sizes) "
             "or export the model with fixed sizes");
      v.dims.push_back(d.dim_value());
    }
    check_tensor_size("input '" + in.name() + "'", v.dims);
    v.known_shape = true;
    g.inputs.push_back(v.name);
    g.values[v.name] = v;
  }
  if (g.inputs.empty()) fail("the model has no (non-constant) inputs");
  for (const auto& [name, dims] : shapes)
    if (!std::count(g.inputs.begin(), g.inputs.end(), name)) fail("--shapes names '", name, "', which is not a model input");
  for (const auto& out : gp.output()) g.outputs.push_back(out.name());
  auto declare = [&](const onnx::ValueInfoProto& vi) {
    if (!vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape()) return;
    std::vector<int64_t> dims;
    for (const auto& d : vi.type().tensor_type().shape().dim()) {
      if (!d.has_dim_value() || d.dim_value() < 0) return;  // symbolic: nothing to compare with
      dims.push_back(d.dim_value());
    }
    check_tensor_size("the declared shape of '" + vi.name() + "'", dims);
    g.declared[vi.name()] = dims;
  };
  for (const auto& vi : gp.value_info()) declare(vi);
  for (const auto& out : gp.output()) declare(out);
  for (const std::string& in : g.inputs) g.declared.erase(in);  // --shapes may have fixed these
  if (g.outputs.empty()) fail("the model has no outputs");

  // Nodes, topologically sorted (Kahn); anything left over is a cycle or reads an undefined value.
  std::vector<Node> pending;
  for (int k = 0; k < gp.node_size(); ++k) {
    const auto& np = gp.node(k);
    Node n;
    n.name = np.name().empty() ? np.op_type() + "_" + std::to_string(k) : np.name();
    n.op = np.domain().empty() || np.domain() == "ai.onnx" ? np.op_type() : np.domain() + "::" + np.op_type();
    n.inputs.assign(np.input().begin(), np.input().end());
    n.outputs.assign(np.output().begin(), np.output().end());
    for (const auto& a : np.attribute()) n.attrs[a.name()] = read_attribute(a, n.name);
    if (n.outputs.empty()) fail("node '", n.name, "' has no outputs");
    pending.push_back(std::move(n));
  }
  std::set<std::string> available;
  for (const auto& [name, v] : g.values) available.insert(name);
  std::set<std::string> produced;
  while (!pending.empty()) {
    bool progress = false;
    for (auto it = pending.begin(); it != pending.end();) {
      const bool ready = std::all_of(it->inputs.begin(), it->inputs.end(),
                                     [&](const std::string& s) { return s.empty() || available.count(s); });
      if (!ready) {
        ++it;
        continue;
      }
      for (const std::string& o : it->outputs) {
        if (o.empty()) continue;
        if (!produced.insert(o).second || g.values.count(o))
          fail("value '", o, "' is produced twice (by node '", it->name, "' and another)");
        available.insert(o);
        Value v;
        v.name = o;
        g.values[o] = v;
      }
      g.nodes.push_back(std::move(*it));
      it = pending.erase(it);
      progress = true;
    }
    if (!progress) {
      const Node& n = pending.front();
      for (const std::string& s : n.inputs)
        if (!s.empty() && !available.count(s))
          fail("node '", n.name, "' (", n.op, ") reads '", s,
               "', which no node, input or initializer provides (or the graph has a cycle)");
    }
  }
  for (const std::string& o : g.outputs)
    if (!g.values.count(o)) fail("graph output '", o, "' is not produced by any node");
  for (const auto& out : gp.output()) {
    const int32_t t = out.type().has_tensor_type() ? out.type().tensor_type().elem_type() : 0;
    if (t != 0 && t != 1 && t != 10)
      fail("output '", out.name(), "' is ", type_name(t), "; DLA outputs are float32 or float16 tensors");
  }
  return g;
}

}  // namespace softdla::builder
