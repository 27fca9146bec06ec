#include "lower.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <numeric>
#include <set>
#include <sstream>

#include "error.h"
#include "int8_range.h"
#include "model_checks.h"
#include "op_rules.h"
#include "sdp_stage.h"

namespace softdla::builder {

Shape dla_shape(const std::vector<int64_t>& d) {
  for (size_t k = 0; k < d.size(); ++k) {
    if (d[k] == 0)
      fail("its output ", dims_text(d), " is empty (axis ", k, " has 0 elements: a Slice whose end is not past its "
           "start, a split part of size 0); the DLA has no empty tensors: remove the node or fix its bounds");
    if (d[k] < 0 || d[k] > INT32_MAX)
      fail("dimension ", d[k], " (axis ", k, " of ", dims_text(d), ") cannot be a DLA tensor dimension");
  }
  switch (d.size()) {
    case 0: return {1, 1, 1, 1};
    case 1: return {1, uint32_t(d[0]), 1, 1};
    case 2: return {uint32_t(d[0]), uint32_t(d[1]), 1, 1};
    case 3: return {uint32_t(d[0]), uint32_t(d[1]), 1, uint32_t(d[2])};
    case 4: return {uint32_t(d[0]), uint32_t(d[1]), uint32_t(d[2]), uint32_t(d[3])};
  }
  fail("its output ", dims_text(d), " has rank ", d.size(), "; softdla lowers tensors of rank 4 at most (TensorRT counts "
       "the dimensions before C, H, W as batch, but no DLA layer of softdla's reads them): Reshape to 4-D before this "
       "node, folding the leading dimensions into the batch or the channels, and back after it");
}

namespace {

// The DLA axis (0..3) of ONNX axis a of a rank-r tensor.
uint32_t dla_axis(int64_t a, size_t r) {
  // Defaults (an absent axis attribute) are not range-checked at validation: check here, for every caller.
  if (a < 0 || a >= int64_t(r) || r > 4)
    fail("axis ", a, " does not exist in a rank-", r, " tensor");
  static const uint32_t map3[] = {0, 1, 3}, map2[] = {0, 1}, map1[] = {1};
  if (r == 4) return uint32_t(a);
  if (r == 3) return map3[a];
  if (r == 2) return map2[a];
  return map1[a];
}

// Channels of a DLA tensor for which the lowering makes weights (c x c for a channel shuffle): the
// DLA's 8,192 limit (docs/DLA-LIMITS.md) checked before anything is allocated from it.
uint32_t weight_channels(const Node& n, int64_t c) {
  constexpr int64_t kDlaMaxChannels = 8192;
  if (c < 1 || c > kDlaMaxChannels)
    fail("node '", n.label(), "' (", n.op, "): ", c, " channels; the DLA takes 1 to ", kDlaMaxChannels);
  return uint32_t(c);
}

class Lowering {
 public:
  Lowering(Graph& g, Target target, std::vector<NodeIssue>* issues, bool fuse)
      : g_(g), issues_(issues), fuse_(fuse) {
    out_.model.target = target;
  }

  Lowered run() {
    for (const std::string& name : g_.inputs) {
      const uint32_t t = new_tensor(name, g_.value(name).dims);
      out_.model.inputs.push_back({t, TensorFormat::kLinear, {}});
      out_.input_names.push_back(name);
    }
    for (Node& n : g_.nodes) {
      if (n.removed || consumed_.count(&n)) continue;
      if (n.unsupported) {
        keep_outputs_of_failed(n);
        continue;
      }
      const size_t ops_before = out_.model.ops.size();
      try {
        lower_node(n);
        // Validate the new ops against the DLA rules now, so problems name this ONNX node.
        for (size_t k = ops_before; k < out_.model.ops.size(); ++k) check_op(out_.model, out_.model.ops[k]);
      } catch (const Error& e) {
        std::string msg = e.what();
        // The DLA op the node became ("op 'x' (sdp): SDP step 0 (...)") is internal: the node names it.
        if (msg.rfind("op '", 0) == 0 && msg.find("): ") != std::string::npos) msg = msg.substr(msg.find("): ") + 3);
        // Every error of a node's lowering names that node, also those raised by shared helpers.
        if (!issues_) {
          if (msg.rfind("node '", 0) == 0) throw;
          fail("node '", n.label(), "' (", n.op, "): ", msg);
        }
        record_issue(n, msg);
        out_.model.ops.resize(ops_before);
        keep_outputs_of_failed(n);
      }
    }
    collapse_qdq_pairs();
    for (const std::string& name : g_.outputs) {
      if (g_.is_const(name)) {
        const Node* p = g_.producer_of_any(name);
        fail("graph output '", name, "' is computed entirely at build time", p ? " (by node '" + p->label() + "' (" + p->op + "))" : "",
             ": the DLA has nothing to compute for it; drop it from the outputs or compute it outside the loadable");
      }
      if (!out_.tensor_of.count(name)) {
        if (issues_) continue;
        const Node* p = g_.producer_of_any(name);
        fail("graph output '", name, "' was not produced", p ? ": its node '" + p->label() + "' (" + p->op + ") did not lower" : "");
      }
      uint32_t t = out_.tensor_of[name];
      const bool is_input = std::any_of(out_.model.inputs.begin(), out_.model.inputs.end(),
                                        [&](const IoBinding& b) { return b.tensor == t; });
      const bool bound = std::any_of(out_.model.outputs.begin(), out_.model.outputs.end(),
                                     [&](const IoBinding& b) { return b.tensor == t; });
      if (is_input || bound) {  // an output that aliases another I/O tensor gets its own copy
        const uint32_t copy = new_tensor(name + " (copy)", {}, out_.model.tensors[t].shape);
        emit("copy of " + name, {t}, copy, ShuffleParams{});
        t = copy;
      }
      out_.model.outputs.push_back({t, TensorFormat::kLinear, {}});
      out_.output_names.push_back(name);
    }
    remove_dead_ops();
    return std::move(out_);
  }

  // Ops whose result nothing reads (e.g. a Flatten folded into the following fully connected layer).
  void remove_dead_ops() {
    Model& m = out_.model;
    std::vector<bool> needed(m.tensors.size(), false);
    for (const IoBinding& io : m.outputs) needed[io.tensor] = true;
    std::vector<Op> kept;
    for (size_t i = m.ops.size(); i-- > 0;) {
      if (!needed[m.ops[i].outputs[0]]) continue;
      for (uint32_t t : m.ops[i].inputs) needed[t] = true;
      kept.push_back(std::move(m.ops[i]));
    }
    m.ops.assign(std::make_move_iterator(kept.rbegin()), std::make_move_iterator(kept.rend()));
    remove_unused_tensors();
  }

  // Calls fn(uint32_t&) on every tensor `op` reads: its inputs and its SDP stage's operand tensors.
  template <typename Fn>
  static void each_read(Op& op, const Fn& fn) {
    for (uint32_t& t : op.inputs) fn(t);
    if (SdpParams* post = sdp_stage(op.params))
      for (SdpStep& st : post->steps)
        if (st.tensor >= 0) {
          uint32_t t = uint32_t(st.tensor);
          fn(t);
          st.tensor = int32_t(t);
        }
  }

  // Tensors no op or binding refers to any more (the output of a Flatten absorbed by the following
  // layer): dropped, so that no pass ever checks or calibrates a tensor the DLA never computes.
  void remove_unused_tensors() {
    Model& m = out_.model;
    std::vector<bool> used(m.tensors.size(), false);
    auto each_ref = [&](const auto& fn) {
      for (IoBinding& io : m.inputs) fn(io.tensor);
      for (IoBinding& io : m.outputs) fn(io.tensor);
      for (Op& op : m.ops) {
        each_read(op, fn);
        for (uint32_t& t : op.outputs) fn(t);
      }
    };
    each_ref([&](uint32_t& t) { used[t] = true; });
    std::vector<uint32_t> new_index(m.tensors.size(), UINT32_MAX);
    std::vector<Tensor> kept;
    for (uint32_t t = 0; t < m.tensors.size(); ++t)
      if (used[t]) new_index[t] = uint32_t(kept.size()), kept.push_back(std::move(m.tensors[t]));
    m.tensors = std::move(kept);
    each_ref([&](uint32_t& t) { t = new_index[t]; });
    std::map<std::string, uint32_t> tensor_of;
    for (const auto& [name, t] : out_.tensor_of)
      if (new_index[t] != UINT32_MAX) tensor_of[name] = new_index[t];
    out_.tensor_of = std::move(tensor_of);
    std::map<uint32_t, float> qdq;
    for (const auto& [t, a] : out_.qdq_amax)
      if (new_index[t] != UINT32_MAX) qdq[new_index[t]] = a;
    out_.qdq_amax = std::move(qdq);
  }

 private:
  // `check` past a node that cannot be built: its outputs whose shapes are known (inferred or declared)
  // become tensors, so later nodes are still checked against them.
  // Outputs no DLA tensor can hold (rank above 4, an empty dimension) stay without one: the nodes reading
  // them are reported in turn, and `check` goes on to the end.
  void keep_outputs_of_failed(const Node& n) {
    for (const std::string& o : n.outputs) {
      if (o.empty() || out_.tensor_of.count(o) || !g_.value(o).known_shape) continue;
      const auto& d = g_.value(o).dims;
      if (d.size() <= 4 && std::all_of(d.begin(), d.end(), [](int64_t v) { return v > 0 && v <= INT32_MAX; }))
        new_tensor(o, d);
    }
  }

  Graph& g_;
  std::vector<NodeIssue>* issues_;
  bool fuse_;  // false: every BatchNormalization and activation its own op (lower's `fuse`)
  Lowered out_;
  std::map<const Node*, bool> consumed_;  // nodes fused into an earlier op

  [[noreturn]] static void bad(const Node& n, const std::string& msg) {
    fail("node '", n.label(), "' (", n.op, "): ", msg);
  }

  // A problem met while lowering `n`, for the capability check: it belongs to the node its message names,
  // which may be another one (a Q/DQ pair's QuantizeLinear checks its DequantizeLinears); `n` is then
  // listed as not lowered because of that node, so each row tells the user which node to change.
  void record_issue(const Node& n, const std::string& msg) {
    const Node* named = nullptr;
    if (msg.rfind("node '", 0) == 0)
      for (const Node& m : g_.nodes)
        if (&m != &n && msg.rfind("node '" + m.label() + "' (" + m.op + "): ", 0) == 0) named = &m;
    if (!named) {
      issues_->push_back({n.name, n.op, msg.rfind("node '", 0) == 0 ? msg.substr(msg.find(": ") + 2) : msg});
      return;
    }
    issues_->push_back({named->name, named->op, msg.substr(("node '" + named->label() + "' (" + named->op + "): ").size())});
    issues_->push_back({n.name, n.op, "does not lower because node '" + named->label() + "' (" + named->op + ") does not (its row says why)"});
  }

  uint32_t new_tensor(const std::string& name, const std::vector<int64_t>& dims, std::optional<Shape> shape = {}) {
    Tensor t;
    t.name = name;
    t.shape = shape ? *shape : dla_shape(dims);
    t.dtype = DataType::kFloat32;
    out_.model.tensors.push_back(t);
    const uint32_t idx = uint32_t(out_.model.tensors.size() - 1);
    out_.tensor_of[name] = idx;
    return idx;
  }
  uint32_t tensor(const Node& n, const std::string& name) {
    auto it = out_.tensor_of.find(name);
    if (it != out_.tensor_of.end()) return it->second;
    if (g_.is_const(name)) return const_tensor(name);
    bad(n, "input '" + name + "' was not produced by a supported node");
  }
  // A constant used as a full tensor operand (e.g. element-wise with a per-element constant).
  uint32_t const_tensor(const std::string& name) {
    const Value& v = g_.value(name);
    const uint32_t t = new_tensor(name, v.dims);
    out_.model.tensors[t].constant = float_constant(*v.constant, {uint32_t(v.count())});
    return t;
  }
  int32_t float_constant(const ConstData& c, std::vector<uint32_t> dims) {
    Constant k{DataType::kFloat32, std::move(dims), std::vector<uint8_t>(c.size() * 4)};
    for (size_t i = 0; i < c.size(); ++i) {
      const float f = float(c.at(i));
      std::memcpy(&k.data[i * 4], &f, 4);
    }
    out_.model.constants.push_back(std::move(k));
    return int32_t(out_.model.constants.size() - 1);
  }
  int32_t float_constant(const std::vector<float>& v, std::vector<uint32_t> dims) {
    Constant k{DataType::kFloat32, std::move(dims), std::vector<uint8_t>(v.size() * 4)};
    std::memcpy(k.data.data(), v.data(), k.data.size());
    out_.model.constants.push_back(std::move(k));
    return int32_t(out_.model.constants.size() - 1);
  }
  void emit(const std::string& name, std::vector<uint32_t> inputs, uint32_t output, OpParams p) {
    out_.model.ops.push_back({name, std::move(inputs), {output}, std::move(p)});
  }
  const ConstData& constant(const Node& n, size_t k, const char* what) {
    if (k >= n.inputs.size() || n.inputs[k].empty() || !g_.is_const(n.inputs[k]))
      bad(n, std::string(what) + " must be a constant (an initializer) on the DLA");
    return *g_.value(n.inputs[k]).constant;
  }
  // The single consumer of a value, if it is not a graph output; used for fusion.
  Node* sole_consumer(const std::string& v) {
    if (std::count(g_.outputs.begin(), g_.outputs.end(), v)) return nullptr;
    auto cs = g_.consumers(v);
    // A consumer `check` already rejected is never fused: its inputs and attributes may be anything.
    return cs.size() == 1 && !cs[0]->unsupported ? cs[0] : nullptr;
  }

  // sole_consumer, looking through Q/DQ pairs on `v` (a quantized model puts one after every op, data
  // movement included): the reader past them, with `v` moved to the value it reads and the pairs' nodes
  // added to `pairs` (the caller consumes them if it fuses). The pairs on one tensor must agree on the
  // scale, which a data movement keeps.
  Node* sole_consumer_past_qdq(std::string& v, std::vector<Node*>& pairs) {
    Node* c = sole_consumer(v);
    while (c && c->op == "QuantizeLinear" && c->inputs[0] == v) {
      Node* dq = sole_consumer(c->outputs[0]);
      if (!dq || dq->op != "DequantizeLinear" || dq->inputs[0] != c->outputs[0]) return nullptr;
      pairs.push_back(c), pairs.push_back(dq);
      v = dq->outputs[0];
      c = sole_consumer(v);
    }
    return c;
  }

  // Appends activation steps of the nodes following `n` (BN handled by the caller) while they fuse;
  // returns the ONNX name of the last fused output.
  // Per-channel or scalar constant of an Add/Sub/Mul/Div whose other input is `data`: its values.
  bool affine_operand(const Node& c, const std::string& data, std::vector<float>& vals) {
    if (c.inputs.size() != 2) return false;
    const bool data_first = c.inputs[0] == data;
    if (!data_first && (c.op == "Sub" || c.op == "Div")) return false;
    const std::string other = data_first ? c.inputs[1] : c.inputs[0];
    // Only where the data keeps its shape: a constant that broadcasts the data up (one channel to three)
    // is not a per-channel step of the producer.
    return g_.is_const(other) && same_dims(data, c.outputs[0]) && channel_values(other, c.outputs[0], vals);
  }

  // Whether a constant of shape `d` broadcasts onto [N, M] as one value or one a column (a row vector).
  static bool row_vector(const std::vector<int64_t>& d, int64_t M) {
    for (size_t k = 0; k + 1 < d.size(); ++k)
      if (d[k] != 1) return false;
    return d.empty() || d.back() == 1 || d.back() == M;
  }

  bool same_dims(const std::string& a, const std::string& b) { return g_.value(a).dims == g_.value(b).dims; }
  // The values of the constant `name` where it broadcasts onto `out` (right-aligned, as ONNX broadcasts)
  // as one value or one a channel; false for any other shape (values along H, W or the batch).
  bool channel_values(const std::string& name, const std::string& out, std::vector<float>& vals) {
    const Value& v = g_.value(name);
    const std::vector<int64_t>& od = g_.value(out).dims;
    vals.clear();
    if (v.count() == 1) {
      vals = {float(v.constant->at(0))};
      return true;
    }
    std::vector<int64_t> full(od.size() - std::min(od.size(), v.dims.size()), 1);
    full.insert(full.end(), v.dims.begin(), v.dims.end());
    if (full.size() > 4 || od.size() > 4) return false;
    const Shape cs = dla_shape(full), ys = dla_shape(od);
    if (cs[0] != 1 || cs[1] != ys[1] || cs[2] != 1 || cs[3] != 1) return false;
    for (size_t k = 0; k < v.constant->size(); ++k) vals.push_back(float(v.constant->at(k)));
    return true;
  }

  // The bias or scale step of Add/Sub/Mul/Div by per-channel or scalar constant values.
  static SdpStep affine_step(const std::string& op, std::vector<float> vals) {
    SdpStep s;
    s.kind = op == "Add" || op == "Sub" ? SdpKind::kBias : SdpKind::kScale;
    for (float& v : vals) v = op == "Sub" ? -v : op == "Div" ? 1.f / v : v;
    s.fvalues = std::move(vals);
    return s;
  }

  // Appends the steps of following activation nodes (and, with `affine`, constant per-channel
  // Add/Sub/Mul/Div) while they fuse; returns the ONNX name of the last fused output.
  std::string fuse_activations(const std::string& from, std::vector<SdpStep>& steps, bool affine = false) {
    if (!fuse_) return from;
    std::string cur = from;
    for (;;) {
      Node* c = sole_consumer(cur);
      if (!c || c->inputs.empty()) return cur;
      std::vector<float> vals;
      if (affine && (c->op == "Add" || c->op == "Sub" || c->op == "Mul" || c->op == "Div") && affine_operand(*c, cur, vals)) {
        steps.push_back(affine_step(c->op, std::move(vals)));
        consumed_[c] = true;
        cur = c->outputs[0];
        continue;
      }
      if (c->inputs[0] != cur) return cur;
      SdpStep s;
      if (c->op == "Relu") {
        s.kind = SdpKind::kRelu;
      } else if (c->op == "LeakyRelu") {
        s.kind = SdpKind::kPRelu;
        s.fvalues = {float(c->get_float("alpha", 0.01))};
      } else if (c->op == "Clip" && clip_bounds(*c).first == 0.0 && clip_bounds(*c).second > 0) {
        s.kind = SdpKind::kClip;
        s.lo = 0.f, s.hi = float(clip_bounds(*c).second);
      } else if (c->op == "PRelu" && g_.is_const(c->inputs[1]) && same_dims(cur, c->outputs[0]) &&
                 channel_values(c->inputs[1], c->outputs[0], s.fvalues)) {
        s.kind = SdpKind::kPRelu;
      } else {
        return cur;
      }
      // Clip(0, a) then Clip(0, b) is Clip(0, min(a, b)): one step, whose bound the INT8 output scale
      // can take (the INT8 chain clips at its last clip's bound, by saturating there).
      if (s.kind == SdpKind::kClip && !steps.empty() && steps.back().kind == SdpKind::kClip && steps.back().lo == 0.f)
        steps.back().hi = std::min(steps.back().hi, s.hi);
      else
        steps.push_back(s);
      consumed_[c] = true;
      cur = c->outputs[0];
    }
  }
  std::pair<double, double> clip_bounds(const Node& n) {
    double lo = n.get_float("min", -INFINITY), hi = n.get_float("max", INFINITY);
    if (n.inputs.size() > 1 && !n.inputs[1].empty() && g_.is_const(n.inputs[1])) lo = g_.value(n.inputs[1]).constant->at(0);
    if (n.inputs.size() > 2 && !n.inputs[2].empty() && g_.is_const(n.inputs[2])) hi = g_.value(n.inputs[2]).constant->at(0);
    return {lo, hi};
  }

  void lower_node(Node& n);
  void lower_conv_node(Node& n) { lower_conv(n, false); }
  void lower_deconv_node(Node& n) { lower_conv(n, true); }
  void lower_identity(Node& n) { alias(n, n.inputs[0], n.outputs[0]); }
  // A Cast of an activation between float32 and float16 (onnxconverter-common's keep_io_types models put
  // them at the graph's edges): nothing, since each layer's precision and each I/O tensor's type are the
  // build's (--fp16/--int8, the I/O formats; dla-facts lists no Cast layer the DLA would run for it). Casts to integers or bool change values the DLA has no op for.
  void lower_cast(Node& n) {
    const int32_t from = g_.value(n.inputs[0]).elem_type, to = int32_t(n.get_int("to", 1));
    auto is_float = [](int32_t t) { return t == 1 || t == 10; };  // float32, float16
    if (!is_float(to) || (from != 0 && !is_float(from)))
      bad(n, "casts a computed tensor " + (from ? "of " + type_name(from) + " " : std::string()) + "to " +
                 type_name(to) + "; on the DLA a Cast of an activation runs only between float32 and float16 (as "
                 "nothing); casts of integers run only as build-time shape arithmetic, on constants");
    alias(n, n.inputs[0], n.outputs[0]);
  }
  void lower_pad(Node& n);
  std::map<const Node*, std::array<int64_t, 4>> merged_pads_;  // a Conv's extra top/left/bottom/right padding from a Pad
  void lower_qdq(Node& n);
  // The outputs of the ops lower_qdq emitted (a Q/DQ pair each): known by their tensor, which no other op
  // writes (node names are not unique enough: the importer names unnamed nodes Op_k, which a Q may be called).
  std::set<uint32_t> qdq_outputs_;

  // A Q/DQ pair's op folded into its input tensor, which then carries the pair's scale (what the DLA runs:
  // no op, the producer writes INT8 at that scale), wherever that is exact: nothing but pairs of that one
  // scale reads the input (another reader would see quantized values where the model gives it the
  // unquantized ones; onnxruntime's DedicatedQDQPair gives each reader a pair of the same scale), and the
  // input has no Q/DQ scale of its own (two pairs of different scales in a row round twice). Where it is
  // not, the op stays: an INT8 requantization, or a conversion of an FP16 value to the pair's INT8.
  bool is_qdq_op(const Op& op) const {
    return op.outputs.size() == 1 && qdq_outputs_.count(op.outputs[0]) && op.inputs.size() == 1 &&
           std::holds_alternative<SdpParams>(op.params);
  }
  void collapse_qdq_pairs() {
    Model& m = out_.model;
    for (size_t i = 0; i < m.ops.size();) {
      if (!is_qdq_op(m.ops[i])) {
        ++i;
        continue;
      }
      const uint32_t x = m.ops[i].inputs[0];
      const float amax = out_.qdq_amax.at(m.ops[i].outputs[0]);
      std::vector<size_t> group;  // the pairs of this scale on x
      bool alone = m.tensors[x].constant < 0;
      for (size_t k = 0; k < m.ops.size() && alone; ++k) {
        Op& op = m.ops[k];
        bool reads = false;
        each_read(op, [&](const uint32_t& t) { reads = reads || t == x; });
        if (reads && is_qdq_op(op) && out_.qdq_amax.at(op.outputs[0]) == amax) {
          group.push_back(k);
          continue;
        }
        alone = !reads;
      }
      for (const std::string& name : g_.outputs) {
        auto it = out_.tensor_of.find(name);
        alone = alone && !(it != out_.tensor_of.end() && it->second == x);
      }
      auto own = out_.qdq_amax.find(x);
      if (!alone || (own != out_.qdq_amax.end() && own->second != amax)) {
        ++i;
        continue;
      }
      out_.qdq_amax[x] = amax;
      for (size_t k : group) {
        const uint32_t y = m.ops[k].outputs[0];
        out_.qdq_amax.erase(y);
        for (Op& other : m.ops) each_read(other, [&](uint32_t& t) { t = t == y ? x : t; });
        for (auto& [name, t] : out_.tensor_of) t = t == y ? x : t;
      }
      for (size_t j = group.size(); j-- > 0;) m.ops.erase(m.ops.begin() + long(group[j]));
      i = group[0];  // the ops before it are as they were
    }
  }
  void lower_concat(Node& n);
  void lower_softmax(Node& n);
  void lower_lrn(Node& n);
  void lower_abs(Node& n);
  void lower_neg(Node& n);
  void lower_sdp(Node& n);
  void lower_conv(Node& n, bool transpose);
  void lower_gemm(Node& n);
  void lower_eltwise(Node& n);
  void lower_pool(Node& n);
  void lower_shuffle(Node& n);
  bool lower_channel_shuffle(Node& n);
  void lower_reduce(Node& n);
  void lower_resize(Node& n);
  void check_given_scales(const Node& n, const std::array<int64_t, 4>& factors);
  void lower_split_slice(Node& n);
  void global_average(const Node& n, uint32_t in, const std::string& out_name, std::optional<Shape> out_shape = {});
  void average_as_depthwise(const Node& n, uint32_t in, const std::string& out_name, std::optional<Shape> out_shape,
                            uint32_t kh, uint32_t kw, uint32_t sh, uint32_t sw, std::array<uint32_t, 4> pads);
  void alias(const Node& n, const std::string& from, const std::string& to) {
    out_.tensor_of[to] = tensor(n, from);
  }
};

// Pad: an identity where every pad is 0 (exporters write such Pads where sizes already agree: the UNet's
// F.pad of a skip connection at power-of-two inputs); zeros around H and W before a Conv become that
// Conv's padding, as TensorRT merges them (the values the Conv reads are the same zeros). The DLA has no
// padding layer for any other Pad.
void Lowering::lower_pad(Node& n) {
  const std::vector<int64_t> pads = n.get_ints("_pads");
  if (std::all_of(pads.begin(), pads.end(), [](int64_t p) { return p == 0; }))
    return alias(n, n.inputs[0], n.outputs[0]);
  const bool input_value = g_.opset >= 11 && n.inputs.size() > 2 && !n.inputs[2].empty();
  const double value = input_value ? constant(n, 2, "the constant value").at(0) : n.get_float("value", 0.0);
  const size_t rank = pads.size() / 2;
  // The Conv may read the padded tensor through Q/DQ pairs (a quantized model's): a pair quantizes the
  // padding zeros to zeros, so it runs on the unpadded tensor alike (the pairs lower as themselves).
  std::string read = n.outputs[0];
  std::vector<Node*> pairs;
  Node* conv = sole_consumer_past_qdq(read, pairs);
  const bool spatial_only = rank == 4 && pads[0] == 0 && pads[1] == 0 && pads[4] == 0 && pads[5] == 0;
  if (!conv || conv->op != "Conv" || conv->inputs[0] != read || value != 0 || !spatial_only ||
      conv->get_string("auto_pad", "NOTSET") != "NOTSET")
    bad(n, "the DLA has no padding layer: a Pad runs only as nothing (all pads 0) or as the padding of the Conv it "
           "feeds (zeros around H and W, the Pad's output read by that Conv alone)");
  // The merged padding obeys the DLA's rule for it (below the kernel's own size): say where it came from.
  const std::vector<int64_t> own = conv->get_ints("pads", {0, 0, 0, 0});
  const std::vector<int64_t>& wd = g_.value(conv->inputs[1]).dims;
  const std::array<int64_t, 4> merged = {pads[2], pads[3], pads[6], pads[7]};
  for (size_t k = 0; k < 4 && own.size() == 4 && wd.size() == 4; ++k)
    if (own[k] + merged[k] >= wd[2 + k % 2])
      bad(n, "its zeros merge into the padding of Conv '" + conv->label() + "', which would then pad by " +
                 std::to_string(own[k] + merged[k]) + " where the DLA pads by less than the kernel's " +
                 std::to_string(wd[2 + k % 2]) + "; the DLA has no padding layer to run the rest");
  merged_pads_[conv] = merged;
  alias(n, n.inputs[0], n.outputs[0]);
}

void Lowering::lower_conv(Node& n, bool transpose) {
  const ConstData& w = constant(n, 1, "the weight input");
  const std::vector<int64_t> wd = conv_weight_dims(g_.value(n.inputs[1]).dims);
  const int64_t groups = n.get_int("group", 1);
  auto pads = n.get_ints("pads", {0, 0, 0, 0});
  if (auto it = merged_pads_.find(&n); it != merged_pads_.end() && pads.size() == 4)
    for (size_t k = 0; k < 4; ++k) pads[k] += it->second[k];  // top, left, bottom, right, as ONNX orders 2-D pads
  const auto strides = n.get_ints("strides", {1, 1}), dil = n.get_ints("dilations", {1, 1});
  const int64_t K = transpose ? wd[1] * groups : wd[0];
  std::vector<float> weights(w.size());
  for (size_t i = 0; i < w.size(); ++i) weights[i] = float(w.at(i));
  std::vector<float> bias(size_t(K), 0.f);
  bool has_bias = n.inputs.size() > 2 && !n.inputs[2].empty();
  if (has_bias) {
    const ConstData& b = constant(n, 2, "the bias input");
    if (b.size() != size_t(K)) bad(n, "bias has " + std::to_string(b.size()) + " values for " + std::to_string(K) + " output channels");
    for (size_t k = 0; k < size_t(K); ++k) bias[k] = float(b.at(k));
  }
  std::string cur = n.outputs[0];
  // BatchNormalization right after: fold into weights and bias (the DLA runs the pair as one conv).
  if (Node* bn = fuse_ ? sole_consumer(cur) : nullptr; bn && bn->op == "BatchNormalization" && !transpose &&
                                     std::all_of(bn->inputs.begin() + 1, bn->inputs.end(), [&](const std::string& s) { return g_.is_const(s); })) {
    const ConstData &gamma = *g_.value(bn->inputs[1]).constant, &beta = *g_.value(bn->inputs[2]).constant,
                    &mean = *g_.value(bn->inputs[3]).constant, &var = *g_.value(bn->inputs[4]).constant;
    for (const ConstData* c : {&gamma, &beta, &mean, &var})
      if (c->size() != size_t(K)) bad(*bn, "parameters must have one value per channel");
    const double eps = bn->get_float("epsilon", 1e-5);
    const size_t per_k = weights.size() / size_t(K);
    for (size_t k = 0; k < size_t(K); ++k) {
      const double s = gamma.at(k) / std::sqrt(var.at(k) + eps);
      for (size_t i = 0; i < per_k; ++i) weights[k * per_k + i] = float(weights[k * per_k + i] * s);
      bias[k] = float((bias[k] - mean.at(k)) * s + beta.at(k));
    }
    has_bias = true;
    consumed_[bn] = true;
    cur = bn->outputs[0];
  }
  std::vector<SdpStep> steps;
  if (has_bias) {
    SdpStep b;
    b.kind = SdpKind::kBias;
    b.fvalues = bias;
    steps.push_back(b);
  }
  cur = fuse_activations(cur, steps);
  const uint32_t in = tensor(n, n.inputs[0]);
  const uint32_t out = new_tensor(cur, g_.value(cur).dims);
  SdpParams post;
  post.steps = steps;
  if (!transpose) {
    if (pads.size() != 4) bad(n, "expects 4 pads");
    ConvParams p;
    p.weights = uint32_t(float_constant(weights, {uint32_t(wd[0]), uint32_t(wd[1]), uint32_t(wd[2]), uint32_t(wd[3])}));
    p.stride_h = uint32_t(strides[0]), p.stride_w = uint32_t(strides[1]);
    p.dilation_h = uint32_t(dil[0]), p.dilation_w = uint32_t(dil[1]);
    p.pad_top = uint32_t(pads[0]), p.pad_left = uint32_t(pads[1]), p.pad_bottom = uint32_t(pads[2]), p.pad_right = uint32_t(pads[3]);
    p.groups = uint32_t(groups);
    p.post = post;
    emit(n.name, {in}, out, p);
  } else {
    if (groups != 1)
      bad(n, "the DLA runs deconvolution with groups = 1 only (a grouped ConvTranspose is the dense one whose weights "
             "are zero between groups: the same numbers, " + std::to_string(groups) + " times the multiply-adds; or "
             "upsample with a nearest Resize and a grouped Conv)");
    if (std::any_of(pads.begin(), pads.end(), [](int64_t v) { return v != 0; }))
      bad(n, "deconvolution padding must be 0 on the DLA (crop with a Slice after it instead)");
    if (dil != std::vector<int64_t>{1, 1}) bad(n, "deconvolution dilation must be 1 on the DLA");
    if (n.get_ints("output_padding", {0, 0}) != std::vector<int64_t>{0, 0}) bad(n, "output_padding is not supported on the DLA");
    DeconvParams p;
    p.weights = uint32_t(float_constant(weights, {uint32_t(wd[0]), uint32_t(wd[1]), uint32_t(wd[2]), uint32_t(wd[3])}));
    p.stride_h = uint32_t(strides[0]), p.stride_w = uint32_t(strides[1]);
    p.post = post;
    emit(n.name, {in}, out, p);
  }
}

void Lowering::lower_gemm(Node& n) {
  const bool matmul = n.op == "MatMul";
  if (n.inputs.size() < 2 || n.inputs[0].empty() || n.outputs.empty())
    bad(n, "MatMul/Gemm needs the inputs A and B and an output");
  const Value& a = g_.value(n.inputs[0]);
  // MatMul of a vector [K] (torch's squeeze() of a batch-1 global average, then a Linear): one row, which
  // lies on the DLA as [1, K, 1, 1] as [1, K] does.
  const bool vector = matmul && a.dims.size() == 1;
  if (a.dims.size() != 2 && !vector)
    bad(n, "the DLA runs MatMul/Gemm on rows [N, K] (a fully connected layer); this input is " + dims_text(a.dims) +
               (a.dims.size() > 2 ? ": a MatMul over the last axis of a 3-D or 4-D tensor (attention, a Linear over "
                                    "tokens) has no DLA layer; a 1x1 Conv over channels does"
                                  : ""));
  if (!matmul && n.get_int("transA", 0)) bad(n, "transA = 1 is not supported (the DLA computes x * W)");
  const ConstData& b = constant(n, 1, "the weight matrix (B)");
  const std::vector<int64_t> bd = g_.value(n.inputs[1]).dims;
  if (bd.size() != 2 || b.size() != size_t(bd[0] * bd[1])) bad(n, "B must be a 2-D constant matrix");
  const bool trans_b = !matmul && n.get_int("transB", 0);
  const int64_t K = a.dims.back(), M = trans_b ? bd[0] : bd[1];
  if ((trans_b ? bd[1] : bd[0]) != K) bad(n, "inner dimensions of A and B differ");
  const double alpha = matmul ? 1.0 : n.get_float("alpha", 1.0), beta = matmul ? 1.0 : n.get_float("beta", 1.0);
  std::vector<float> w(size_t(M * K));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < K; ++k) w[size_t(m * K + k)] = float(alpha * b.at(size_t(trans_b ? m * K + k : k * M + m)));
  std::vector<SdpStep> steps;
  std::string cur = n.outputs[0];
  // Gemm's C, or a MatMul followed by Add of a constant row vector: the bias.
  std::vector<float> bias;
  if (!matmul && n.inputs.size() > 2 && !n.inputs[2].empty()) {
    const ConstData& c = constant(n, 2, "the bias (C)");
    if (!row_vector(g_.value(n.inputs[2]).dims, M))
      bad(n, "the bias C (shape " + dims_text(g_.value(n.inputs[2]).dims) + ") must be one value or one per output column ([" +
                 std::to_string(M) + "] or [1, " + std::to_string(M) + "]): the DLA adds one bias per channel");
    for (int64_t m = 0; m < M; ++m) bias.push_back(float(beta * c.at(c.size() == 1 ? 0 : size_t(m))));
  } else if (Node* add = sole_consumer(cur); matmul && add && add->op == "Add" && add->inputs.size() == 2 &&
                                              !add->outputs.empty()) {
    const std::string other = add->inputs[0] == cur ? add->inputs[1] : add->inputs[0];
    if (g_.is_const(other) && g_.value(other).count() == M && row_vector(g_.value(other).dims, M)) {
      const ConstData& c = *g_.value(other).constant;
      for (int64_t m = 0; m < M; ++m) bias.push_back(float(c.at(size_t(m))));
      consumed_[add] = true;
      cur = add->outputs[0];
    }
  }
  if (!bias.empty()) {
    SdpStep s;
    s.kind = SdpKind::kBias;
    s.fvalues = bias;
    steps.push_back(s);
  }
  cur = fuse_activations(cur, steps);
  // Flatten of a 4-D tensor right before: convolve the 4-D tensor with an HxW kernel instead.
  uint32_t in = tensor(n, n.inputs[0]);
  std::vector<uint32_t> wdims{uint32_t(M), uint32_t(K), 1, 1};
  if (Node* p = g_.producer_of(n.inputs[0]); p && !p->inputs.empty() && (p->op == "Flatten" || p->op == "Reshape")) {
    const Value& src = g_.value(p->inputs[0]);
    if (!vector && src.dims.size() == 4 && src.dims[2] <= 32 && src.dims[3] <= 32 && src.dims[0] == a.dims[0] &&
        out_.tensor_of.count(p->inputs[0])) {
      in = out_.tensor_of[p->inputs[0]];
      wdims = {uint32_t(M), uint32_t(src.dims[1]), uint32_t(src.dims[2]), uint32_t(src.dims[3])};
    }
  }
  ConvParams p;
  p.weights = uint32_t(float_constant(w, wdims));
  p.post.steps = steps;
  emit(n.name, {in}, new_tensor(cur, g_.value(cur).dims), p);
}

void Lowering::lower_eltwise(Node& n) {
  const std::string& op = n.op;
  std::vector<std::string> ins;
  for (const std::string& s : n.inputs)
    if (!s.empty()) ins.push_back(s);
  const Value& y = g_.value(n.outputs[0]);
  const Shape ys = dla_shape(y.dims);
  std::vector<SdpStep> steps;
  std::vector<uint32_t> inputs;
  // Per-channel or scalar constant operand: bias / scale steps (SDP X stage) instead of a tensor.
  if (ins.size() == 2 && (op == "Add" || op == "Sub" || op == "Mul" || op == "Div")) {
    std::vector<float> vals;
    std::string data;
    if (affine_operand(n, ins[0], vals)) data = ins[0];
    else if (affine_operand(n, ins[1], vals)) data = ins[1];  // constant first: Add/Mul only
    if (!data.empty()) {
      steps.push_back(affine_step(op, std::move(vals)));
      inputs.push_back(tensor(n, data));
      const std::string cur = fuse_activations(n.outputs[0], steps, true);
      SdpParams p;
      p.steps = steps;
      emit(n.name, inputs, new_tensor(cur, g_.value(cur).dims), p);
      return;
    }
  }
  if (op == "Sum" && ins.size() == 1) return alias(n, ins[0], n.outputs[0]);
  // Tensor-tensor: the full-size operand is the data; the others broadcast in NCHW, NC11 or N111 form.
  std::vector<std::string> order = ins;
  const bool commutative = op != "Sub" && op != "Div";
  // The data: a full-size input computed at run time (a full-size constant cannot be the SDP's stream).
  auto full = [&](const std::string& v) { return dla_shape(g_.value(v).dims) == ys; };
  auto data = [&](const std::string& v) { return full(v) && !g_.is_const(v); };
  if (!data(order[0])) {
    auto it = std::find_if(order.begin(), order.end(), data);
    if (it == order.end() && std::any_of(order.begin(), order.end(), full))
      bad(n, "only a constant input has the output's shape: the DLA streams a computed full-size tensor and "
             "applies the other inputs to it; broadcast the computed input to the output's shape first");
    if (it == order.end()) bad(n, "no input has the output's shape (broadcasting both inputs is not a DLA form)");
    std::iter_swap(order.begin(), it);
  }
  // a - b with only b full-size: compute b - a, then negate (the Scale(-1) step below). a / b has no
  // such identity: the dividend must be the full-size operand.
  const bool swapped = order[0] != ins[0];
  if (swapped && op == "Div" && g_.is_const(ins[0]))
    bad(n, "Div of a constant by a computed tensor is not a DLA form (the DLA divides a computed tensor by "
           "another or by constants); divide the other way and take the reciprocal of the result before, or "
           "multiply by a constant where the divisor is one");
  if (swapped && op == "Div")
    bad(n, "Div whose dividend broadcasts onto the divisor's shape is not a DLA form (the DLA divides the "
           "full-size tensor by an NCHW, NC11 or N111 one); expand the dividend first, or divide the other way and take the reciprocal before");
  // Division of two tensors came with the Orin DLA's software (DLA 3.x); dividing by a constant is a
  // scale, above, which Xavier has.
  if (op == "Div" && out_.model.target == Target::kXavier && !g_.is_const(order[1]))
    bad(n, "element-wise division by a computed tensor is an Orin DLA op (DLA 3.x); Xavier's DLA has none: build "
           "for --target=orin, or divide by a constant");
  inputs.push_back(tensor(n, order[0]));
  const SdpKind kind = op == "Add" || op == "Sum" ? SdpKind::kEltAdd : op == "Sub" ? SdpKind::kEltSub
                       : op == "Mul" ? SdpKind::kEltMul : op == "Div" ? SdpKind::kEltDiv
                       : op == "Max" ? SdpKind::kEltMax : SdpKind::kEltMin;
  for (size_t k = 1; k < order.size(); ++k) {
    const uint32_t t = tensor(n, order[k]);
    if (g_.is_const(order[k])) {  // a constant operand: its NCHW view aligned to the output's rank
      std::vector<int64_t> d = g_.value(order[k]).dims;
      std::vector<int64_t> padded(y.dims.size() - std::min(y.dims.size(), d.size()), 1);
      padded.insert(padded.end(), d.begin(), d.end());
      out_.model.tensors[t].shape = dla_shape(padded);
    }
    if (std::find(inputs.begin() + 1, inputs.end(), t) == inputs.end()) inputs.push_back(t);
    SdpStep s;
    s.kind = kind;
    s.tensor = int32_t(t);
    steps.push_back(s);
  }
  if (swapped && !commutative) {
    SdpStep neg;
    neg.kind = SdpKind::kScale;
    neg.fvalues = {-1.f};
    steps.push_back(neg);
  }
  const std::string cur = fuse_activations(n.outputs[0], steps);
  SdpParams p;
  p.steps = steps;
  emit(n.name, inputs, new_tensor(cur, g_.value(cur).dims), p);
}

void Lowering::lower_pool(Node& n) {
  const uint32_t in = tensor(n, n.inputs[0]);
  if (n.op == "GlobalAveragePool") return global_average(n, in, n.outputs[0]);
  if (n.op == "GlobalMaxPool") {
    emit(n.name, {in}, new_tensor(n.outputs[0], g_.value(n.outputs[0]).dims), ReduceMaxParams{{2, 3}});
    return;
  }
  const auto k = n.get_ints("kernel_shape"), s = n.get_ints("strides", {1, 1}), p = n.get_ints("pads", {0, 0, 0, 0});
  PoolParams pp;
  pp.kind = n.op == "MaxPool" ? PoolKind::kMax : PoolKind::kAverage;
  pp.kernel_h = uint32_t(k[0]), pp.kernel_w = uint32_t(k[1]);
  pp.stride_h = uint32_t(s[0]), pp.stride_w = uint32_t(s[1]);
  pp.pad_top = uint32_t(p[0]), pp.pad_left = uint32_t(p[1]), pp.pad_bottom = uint32_t(p[2]), pp.pad_right = uint32_t(p[3]);
  pp.exclude_padding = n.op == "AveragePool" && n.get_int("count_include_pad", 0) == 0 &&
                       std::any_of(p.begin(), p.end(), [](int64_t v) { return v > 0; });
  // ceil_mode's last windows may reach past the padded input (infer_pool widened the bottom and right
  // padding to hold them), and ONNX averages those over what lies inside the padded input. Counting the
  // model's padding but not that overhang is no DLA divisor; without padding of the model's own it is
  // the divisor that leaves all padding out.
  const auto overhang = n.get_ints("_ceil_overhang", {0, 0});
  if (n.op == "AveragePool" && !pp.exclude_padding && (overhang[0] > 0 || overhang[1] > 0)) {
    const bool model_padding = p[0] > 0 || p[1] > 0 || p[2] > overhang[0] || p[3] > overhang[1];
    if (model_padding)
      bad(n, "count_include_pad=1 with ceil_mode=1 and padding: ONNX counts the padding but not the windows' "
             "overhang past it, which no DLA pooling divisor does; set count_include_pad=0, or ceil_mode=0 with "
             "the bottom and right padding increased");
    if (out_.model.target == Target::kXavier)
      bad(n, "ceil_mode=1 windows reach past the input, and ONNX averages them over the elements inside; Xavier's "
             "DLA divides by the whole window: build for --target=orin, or use ceil_mode=0");
    pp.exclude_padding = true;
  }
  // Average windows beyond the pooling limit of 8 (TensorRT splits them too): a depthwise convolution,
  // exact when no padding has to be left out of the count.
  if (pp.kind == PoolKind::kAverage && (k[0] > 8 || k[1] > 8) && !pp.exclude_padding && k[0] <= 32 && k[1] <= 32 &&
      s[0] <= 8 && s[1] <= 8)
    return average_as_depthwise(n, in, n.outputs[0], {}, uint32_t(k[0]), uint32_t(k[1]), uint32_t(s[0]), uint32_t(s[1]),
                                {uint32_t(p[0]), uint32_t(p[1]), uint32_t(p[2]), uint32_t(p[3])});
  if (pp.kind == PoolKind::kAverage && (k[0] > 8 || k[1] > 8))
    bad(n, "an average window of " + std::to_string(k[0]) + "x" + std::to_string(k[1]) + " is beyond the pooling engine's "
           "8x8; windows up to 32x32 with strides up to 8 run as a depthwise convolution, which divides every window "
           "by its whole area: within those limits set count_include_pad=1 (or remove the padding) and ceil_mode=0, "
           "or use a window of at most 8");
  if (pp.exclude_padding && out_.model.target == Target::kXavier)
    bad(n, "Xavier's DLA averages with padding included; set count_include_pad=1 or build for --target=orin");
  emit(n.name, {in}, new_tensor(n.outputs[0], g_.value(n.outputs[0]).dims), pp);
}

// Average over H x W as a chain of pools whose windows are at most 8 (the DLA's limit): an average
// of averages over equal blocks is the average.
// Average pooling as a depthwise convolution (windows beyond the pooling limit): zero padding is
// counted, as count_include_pad does.
void Lowering::average_as_depthwise(const Node& n, uint32_t in, const std::string& out_name, std::optional<Shape> out_shape,
                                    uint32_t kh, uint32_t kw, uint32_t sh, uint32_t sw, std::array<uint32_t, 4> pads) {
  const uint32_t c = weight_channels(n, out_.model.tensors[in].shape[1]);
  ConvParams p;
  p.weights = uint32_t(float_constant(std::vector<float>(size_t(c) * kh * kw, 1.f / float(kh * kw)), {c, 1, kh, kw}));
  p.groups = c;
  p.stride_h = sh, p.stride_w = sw;
  p.pad_top = pads[0], p.pad_left = pads[1], p.pad_bottom = pads[2], p.pad_right = pads[3];
  const uint32_t out = out_shape ? new_tensor(out_name, {}, out_shape) : new_tensor(out_name, g_.value(out_name).dims);
  emit(n.name, {in}, out, p);
}

void Lowering::global_average(const Node& n, uint32_t in, const std::string& out_name, std::optional<Shape> out_shape) {
  const Shape s = out_.model.tensors[in].shape;
  auto factors = [&](uint32_t v) {
    std::vector<uint32_t> f;
    for (uint32_t d = 8; d >= 2 && v > 1;)
      if (v % d == 0) f.push_back(d), v /= d;
      else --d;
    if (v != 1) f.clear();
    return f;
  };
  std::vector<uint32_t> fh = factors(s[2]), fw = factors(s[3]);
  const bool one_window = s[2] <= 8 && s[3] <= 8;
  if ((fh.empty() && s[2] > 1) || (fw.empty() && s[3] > 1) || (!one_window && s[2] <= 32 && s[3] <= 32)) {
    // One depthwise convolution with an HxW kernel of 1/(HW) weights computes the same mean within the
    // convolution's 32x32 limit: where a side has a prime factor above the pooling window limit
    // (SqueezeNet's 13x13), and wherever the map needs more than one pooling window. A chain of pools
    // rounds its intermediate results; in INT8 without calibration data (Q/DQ scales or a cache alone)
    // they took the input's scale, and the second rounding put outputs up to half the ratio of the input's
    // scale to the output's off (13 steps on an 8x12 map of zero-mean values).
    if (s[2] > 32 || s[3] > 32)
      bad(n, "global average over " + std::to_string(s[2]) + "x" + std::to_string(s[3]) +
                 " needs pooling windows above 8 (a prime factor > 8) and is larger than a 32x32 convolution; "
                 "resize the feature map first");
    return average_as_depthwise(n, in, out_name, out_shape, s[2], s[3], 1, 1, {0, 0, 0, 0});
  }
  const size_t steps = std::max<size_t>(1, std::max(fh.size(), fw.size()));
  fh.resize(steps, 1), fw.resize(steps, 1);
  uint32_t cur = in;
  Shape shape = s;
  for (size_t i = 0; i < steps; ++i) {
    PoolParams p;
    p.kind = PoolKind::kAverage;
    p.kernel_h = p.stride_h = fh[i], p.kernel_w = p.stride_w = fw[i];
    shape[2] /= fh[i], shape[3] /= fw[i];
    const bool last = i + 1 == steps;
    const uint32_t next = last ? (out_shape ? new_tensor(out_name, {}, out_shape) : new_tensor(out_name, g_.value(out_name).dims))
                               : new_tensor(out_name + "_pool" + std::to_string(i), {}, shape);
    emit(steps == 1 ? n.name : n.name + " (step " + std::to_string(i + 1) + ")", {cur}, next, p);
    cur = next;
  }
}

// ShuffleNet's channel shuffle, Reshape [N,C,H,W] -> [N,g,C/g,H,W], Transpose (0,2,1,3,4), Reshape back
// to [N,C,H,W]: a rank-5 view the DLA does not have, but only a permutation of channels, which a 1x1
// convolution with 0/1 weights computes exactly (in INT8 too: each output is one input times 1).
bool Lowering::lower_channel_shuffle(Node& n) {
  const Value& x = g_.value(n.inputs[0]);
  const Value& y = g_.value(n.outputs[0]);
  if (n.op != "Reshape" || y.dims.size() != 5 || x.dims.size() != 4) return false;
  std::vector<Node*> pairs;  // Q/DQ pairs on the rank-5 tensors (a quantized model's): a permutation keeps their scale
  std::string v = n.outputs[0];
  Node* t = sole_consumer_past_qdq(v, pairs);
  if (!t || t->op != "Transpose" || t->inputs[0] != v) return false;
  const std::vector<int64_t> perm = t->get_ints("perm");
  if (perm != std::vector<int64_t>{0, 2, 1, 3, 4}) return false;
  v = t->outputs[0];
  Node* back = sole_consumer_past_qdq(v, pairs);
  if (!back || back->op != "Reshape" || back->inputs[0] != v || g_.value(back->outputs[0]).dims != x.dims) return false;
  for (size_t k = 2; k < pairs.size(); k += 2)
    if (constant(*pairs[k], 1, "the Q/DQ scale").at(0) != constant(*pairs[0], 1, "the Q/DQ scale").at(0))
      bad(*pairs[k], "a channel shuffle's Q/DQ pairs use different scales; a permutation of channels keeps one scale");
  if (y.dims[0] != x.dims[0] || y.dims[1] * y.dims[2] != x.dims[1] || y.dims[3] != x.dims[2] || y.dims[4] != x.dims[3]) return false;
  for (Node* q : pairs) consumed_[q] = true;  // only once the shuffle is certain: else they lower as themselves
  const uint32_t c = weight_channels(n, x.dims[1]), groups = uint32_t(y.dims[1]), per = uint32_t(y.dims[2]);
  std::vector<float> w(size_t(c) * c, 0.f);
  for (uint32_t i = 0; i < per; ++i)
    for (uint32_t j = 0; j < groups; ++j) w[size_t(i * groups + j) * c + (j * per + i)] = 1.f;  // out (i,j) <- in (j,i)
  ConvParams p;
  p.weights = uint32_t(float_constant(w, {c, c, 1, 1}));
  consumed_[t] = consumed_[back] = true;
  emit(n.name, {tensor(n, n.inputs[0])}, new_tensor(back->outputs[0], x.dims), p);
  return true;
}

void Lowering::lower_shuffle(Node& n) {
  if (lower_channel_shuffle(n)) return;
  const Value& x = g_.value(n.inputs[0]);
  const Value& y = g_.value(n.outputs[0]);
  const uint32_t in = tensor(n, n.inputs[0]);
  ShuffleParams p;
  if (n.op == "Transpose") {
    auto perm = n.get_ints("perm");
    if (x.dims.size() <= 1) return alias(n, n.inputs[0], n.outputs[0]);  // a scalar or vector: nothing moves
    if (perm.empty())
      for (int64_t k = int64_t(x.dims.size()) - 1; k >= 0; --k) perm.push_back(k);
    if (perm[0] != 0) bad(n, "the batch dimension cannot move on the DLA");
    if (x.dims.size() == 4) {
      for (int k = 0; k < 4; ++k) p.perm[size_t(k)] = uint32_t(perm[size_t(k)]);
    } else if (x.dims.size() == 3) {  // [N, C, W] viewed as [N, C, 1, W]
      std::array<uint32_t, 4> p4{0, dla_axis(perm[1], 3), 2, dla_axis(perm[2], 3)};
      p.perm = p4;
    } else if (x.dims.size() != 2 || perm[1] != 1) {
      bad(n, "transpose of this rank is not a DLA shuffle");
    }
  } else if (dla_shape(x.dims)[0] != dla_shape(y.dims)[0]) {
    bad(n, "the reshape changes the batch dimension, which the DLA cannot do");
  } else if (dla_shape(x.dims) == dla_shape(y.dims)) {
    return alias(n, n.inputs[0], n.outputs[0]);  // same NCHW view: nothing to move
  }
  emit(n.name, {in}, new_tensor(n.outputs[0], y.dims), p);
}

void Lowering::lower_reduce(Node& n) {
  const Value& x = g_.value(n.inputs[0]);
  const uint32_t in = tensor(n, n.inputs[0]);
  std::vector<uint32_t> axes;
  for (int64_t a : n.get_ints("_axes")) axes.push_back(dla_axis(a, x.dims.size()));
  std::sort(axes.begin(), axes.end());
  if (std::count(axes.begin(), axes.end(), 0u)) bad(n, "reducing over the batch dimension is not supported on the DLA");
  const bool keep = n.get_int("keepdims", 1) != 0;
  const std::string target = n.outputs[0];
  Shape reduced = dla_shape(x.dims);
  for (uint32_t a : axes) reduced[a] = 1;
  const bool same_view = dla_shape(g_.value(target).dims) == reduced;
  if (!keep && !same_view) bad(n, "keepdims=0 changes the DLA view here; use keepdims=1 and a Reshape");
  if (n.op == "ReduceMax") {
    emit(n.name, {in}, new_tensor(target, g_.value(target).dims), ReduceMaxParams{axes});
    return;
  }
  // ReduceSum is the mean times the element count (TensorRT's DLA rewrite).
  const bool sum = n.op == "ReduceSum";
  // Over H or W alone where the other one is 1 (a rank-3 [N, C, T] tensor lies as [N, C, 1, T]: the mean
  // over time) is the reduction over both.
  const Shape xs_view = dla_shape(x.dims);
  bool both_spatial = !axes.empty() && std::all_of(axes.begin(), axes.end(), [](uint32_t a) { return a >= 2; });
  for (uint32_t a : {2u, 3u}) both_spatial = both_spatial && (std::count(axes.begin(), axes.end(), a) > 0 || xs_view[a] == 1);
  if (both_spatial) axes = {2, 3};
  if (axes == std::vector<uint32_t>{2, 3}) {
    if (!sum) return global_average(n, in, target);
    const Shape xs = dla_shape(x.dims);
    const std::string mean = target + "_mean";
    global_average(n, in, mean, reduced);
    SdpParams p;
    p.steps = {affine_step("Mul", {float(xs[2]) * float(xs[3])})};
    emit(n.name + " (sum)", {out_.tensor_of.at(mean)}, new_tensor(target, g_.value(target).dims), p);
    return;
  }
  if (axes == std::vector<uint32_t>{1}) {  // over C: a 1x1 conv of 1/C (mean) or 1 (sum) weights
    const uint32_t c = weight_channels(n, dla_shape(x.dims)[1]);
    ConvParams p;
    p.weights = uint32_t(float_constant(std::vector<float>(c, sum ? 1.f : 1.f / float(c)), {1, c, 1, 1}));
    emit(n.name, {in}, new_tensor(target, g_.value(target).dims), p);
    return;
  }
  bad(n, n.op + " over these axes is not supported on the DLA (ReduceMax: any of C/H/W; ReduceMean, ReduceSum: H+W or C); "
             "reshape so that the reduced axes are H and W, or C");
}

// ONNX sizes a resize by floor(x * scale) but samples with the scale as given: 2.1 over 4 rows makes 8 rows,
// sampled at i / 2.1, not at i / 2. Where the model gives scales (not sizes), each must be exactly the whole
// factor the DLA runs, or the outputs would differ from the model's.
void Lowering::check_given_scales(const Node& n, const std::array<int64_t, 4>& factors) {
  const size_t at = n.op == "Upsample" ? 1 : 2;
  const bool sized = n.op == "Resize" && n.inputs.size() > 3 && !n.inputs[3].empty() && g_.is_const(n.inputs[3]) &&
                     g_.value(n.inputs[3]).constant->size() > 0;
  if (sized || at >= n.inputs.size() || n.inputs[at].empty() || !g_.is_const(n.inputs[at])) return;
  const ConstData& scales = *g_.value(n.inputs[at]).constant;
  static const char* const axis[] = {"N", "C", "H", "W"};
  for (size_t k = 0; k < 4 && k < scales.size(); ++k)  // scale k of a rank-r tensor: DLA axis a ([N, C, T]: T is W)
    if (const uint32_t a = dla_axis(int64_t(k), scales.size()); float(scales.at(k)) != float(factors[a])) {
      std::ostringstream msg;
      msg << "scale " << scales.at(k) << " on " << axis[a] << " is not the whole factor " << factors[a]
          << " its output size makes: ONNX samples the input at (output position) / " << scales.at(k)
          << ", and the DLA resizes by whole factors only; give whole-number scales, or sizes";
      bad(n, msg.str());
    }
}

void Lowering::lower_resize(Node& n) {
  const Value& x = g_.value(n.inputs[0]);
  const Value& y = g_.value(n.outputs[0]);
  if (x.dims.size() != 4 && x.dims.size() != 3) bad(n, "resize needs a 3-D or 4-D tensor");
  // A rank-3 [N, C, T] tensor lies on the DLA as [N, C, 1, T]: its resize is the 2-D one over that view.
  const Shape xd = dla_shape(x.dims), yd = dla_shape(y.dims);
  if (yd[0] != xd[0] || yd[1] != xd[1]) bad(n, "only H and W may be scaled on the DLA");
  const int64_t sh = yd[2] / xd[2], sw = yd[3] / xd[3];
  if (sh * xd[2] != yd[2] || sw * xd[3] != yd[3])
    bad(n, "scales must be integers on the DLA (got H x" + std::to_string(double(yd[2]) / double(xd[2])) + ", W x" +
               std::to_string(double(yd[3]) / double(xd[3])) + ")");
  check_given_scales(n, {1, 1, sh, sw});
  const std::string mode = n.get_string("mode", "nearest");
  std::string coord = n.get_string("coordinate_transformation_mode", n.op == "Upsample" ? "asymmetric" : "half_pixel");
  // pytorch_half_pixel differs from half_pixel only where an output axis has length 1, which a whole
  // factor makes only from length 1 with factor 1: there both sample position 0. The same resize.
  if (coord == "pytorch_half_pixel") coord = "half_pixel";
  ResizeParams p;
  p.scale_h = uint32_t(sh), p.scale_w = uint32_t(sw);
  if (mode == "nearest") {
    p.mode = ResizeMode::kNearest;
    const std::string rounding = n.get_string("nearest_mode", "round_prefer_floor");
    if (coord == "asymmetric" && (rounding == "floor" || n.op == "Upsample")) p.nearest = NearestRounding::kAsymmetricFloor;
    else if (coord == "half_pixel" && rounding == "round_prefer_floor") p.nearest = NearestRounding::kHalfPixelRoundDown;
    else if (coord == "half_pixel" && rounding == "round_prefer_ceil") p.nearest = NearestRounding::kHalfPixelRoundUp;
    else if (coord == "asymmetric" && (rounding == "round_prefer_floor" || rounding == "round_prefer_ceil")) {
      // asymmetric + rounding equals floor for integer factors only when it rounds x/s down: x = i/s
      // rounds to nearest, which differs; not a DLA mode.
      bad(n, "nearest resize with asymmetric coordinates needs nearest_mode=floor on the DLA");
    } else {
      bad(n, "nearest resize mode (" + coord + ", " + rounding + ") is not a DLA mode");
    }
  } else if ((mode == "linear" || mode == "bilinear") && xd[2] == 1 && xd[3] == 1) {
    // From a 1 x 1 map every output interpolates the one pixel, whatever the coordinates: a broadcast,
    // which the DLA's nearest resize computes with its wider factor range (DeepLab's image-pooling branch
    // upsamples its global average this way).
    p.mode = ResizeMode::kNearest;
    p.nearest = NearestRounding::kAsymmetricFloor;
  } else if (mode == "linear" || mode == "bilinear") {
    p.mode = ResizeMode::kBilinear;
    if (n.op == "Upsample")
      bad(n, "Upsample's linear mode samples at asymmetric coordinates (output / scale), and the DLA's bilinear "
             "resize at half-pixel ones; write a Resize with coordinate_transformation_mode=half_pixel");
    if (coord != "half_pixel" && coord != "pytorch_half_pixel")
      bad(n, "bilinear resize needs coordinate_transformation_mode=half_pixel on the DLA (got " + coord + ")");
  } else {
    bad(n, "resize mode '" + mode + "' is not supported (nearest or linear)");
  }
  emit(n.name, {tensor(n, n.inputs[0])}, new_tensor(n.outputs[0], y.dims), p);
}

void Lowering::lower_split_slice(Node& n) {
  const Value& x = g_.value(n.inputs[0]);
  const uint32_t in = tensor(n, n.inputs[0]);
  if (n.op == "Slice") {
    const auto begin = n.get_ints("_begin"), step = n.get_ints("_step");
    if (std::any_of(step.begin(), step.end(), [](int64_t s) { return s != 1; })) bad(n, "slice steps must be 1 on the DLA");
    SliceParams p;
    std::vector<int64_t> b4(4, 0);
    for (size_t k = 0; k < begin.size(); ++k) b4[dla_axis(int64_t(k), x.dims.size())] = begin[k];
    if (b4[0] != 0 || g_.value(n.outputs[0]).dims[0] != x.dims[0]) bad(n, "the DLA cannot slice the batch dimension");
    for (int k = 0; k < 4; ++k) p.start[size_t(k)] = uint32_t(b4[size_t(k)]);
    emit(n.name, {in}, new_tensor(n.outputs[0], g_.value(n.outputs[0]).dims), p);
    return;
  }
  const auto parts = n.get_ints("_split");
  const uint32_t axis = dla_axis(n.get_int("_axis", 0), x.dims.size());
  if (axis == 0) bad(n, "the DLA cannot split the batch dimension");
  uint32_t offset = 0;
  for (size_t k = 0; k < parts.size(); ++k) {
    SliceParams p;
    p.start[axis] = offset;
    offset += uint32_t(parts[k]);
    if (n.outputs[k].empty()) continue;
    emit(n.name + " [" + std::to_string(k) + "]", {in}, new_tensor(n.outputs[k], g_.value(n.outputs[k]).dims), p);
  }
}

void Lowering::lower_node(Node& n) {
  for (const std::string& o : n.outputs)
    if (!o.empty() && !g_.value(o).known_shape) bad(n, "shape unknown");
  // The DLA computes on floating-point data only (FP16/INT8 encodings of real values): integer or bool
  // tensors are shape arithmetic, which must fold away; anything else would run as float and be wrong.
  for (const std::string& o : n.outputs)
    if (!o.empty() && !is_float_type(g_.value(o).elem_type) && n.op != "QuantizeLinear")  // Q/DQ: a scale only
      bad(n, "computes " + type_name(g_.value(o).elem_type) + " values at run time; the DLA runs floating-point layers only "
             "(integer arithmetic must be computable at build time from constants)");
  using Lower = void (Lowering::*)(Node&);
  static const std::map<std::string, Lower> table = {
      {"Conv", &Lowering::lower_conv_node}, {"ConvTranspose", &Lowering::lower_deconv_node},
      {"Gemm", &Lowering::lower_gemm}, {"MatMul", &Lowering::lower_gemm},
      {"Add", &Lowering::lower_eltwise}, {"Sub", &Lowering::lower_eltwise}, {"Mul", &Lowering::lower_eltwise},
      {"Div", &Lowering::lower_eltwise}, {"Max", &Lowering::lower_eltwise}, {"Min", &Lowering::lower_eltwise},
      {"Sum", &Lowering::lower_eltwise}, {"Neg", &Lowering::lower_neg},
      {"MaxPool", &Lowering::lower_pool}, {"AveragePool", &Lowering::lower_pool},
      {"GlobalAveragePool", &Lowering::lower_pool}, {"GlobalMaxPool", &Lowering::lower_pool},
      {"Reshape", &Lowering::lower_shuffle}, {"Flatten", &Lowering::lower_shuffle}, {"Squeeze", &Lowering::lower_shuffle},
      {"Unsqueeze", &Lowering::lower_shuffle}, {"Transpose", &Lowering::lower_shuffle},
      {"Identity", &Lowering::lower_identity}, {"Pad", &Lowering::lower_pad}, {"Dropout", &Lowering::lower_identity},
      {"Cast", &Lowering::lower_cast},
      {"ReduceMean", &Lowering::lower_reduce}, {"ReduceMax", &Lowering::lower_reduce}, {"ReduceSum", &Lowering::lower_reduce},
      {"Resize", &Lowering::lower_resize}, {"Upsample", &Lowering::lower_resize},
      {"Split", &Lowering::lower_split_slice}, {"Slice", &Lowering::lower_split_slice},
      {"QuantizeLinear", &Lowering::lower_qdq}, {"Concat", &Lowering::lower_concat}, {"Softmax", &Lowering::lower_softmax},
      {"LRN", &Lowering::lower_lrn}, {"Abs", &Lowering::lower_abs},
      {"BatchNormalization", &Lowering::lower_sdp}, {"Relu", &Lowering::lower_sdp}, {"LeakyRelu", &Lowering::lower_sdp},
      {"Clip", &Lowering::lower_sdp}, {"PRelu", &Lowering::lower_sdp}, {"Sigmoid", &Lowering::lower_sdp},
      {"Tanh", &Lowering::lower_sdp},
  };
  const auto it = table.find(n.op);
  if (it == table.end()) {
    const OpRule* rule = find_op_rule(n.op);
    if (rule && rule->fold_only)
      bad(n, n.op + " runs only as build-time shape arithmetic: its inputs must be constants" +
                 (n.op == "Pow" ? "; Pow(x, 2) of an activation is Mul(x, x), which runs" : ""));
    bad(n, "operator '" + n.op + "' does not run on the DLA");
  }
  const size_t first_op = out_.model.ops.size();
  (this->*(it->second))(n);
  // The convolution and SDP engines stream a computed tensor: one of theirs whose data input is a
  // constant (a Conv of an initializer, which constant folding does not evaluate) is a loadable the
  // loader refuses. Said here, on the node, so that check and build agree.
  for (size_t i = first_op; i < out_.model.ops.size(); ++i) {
    const Op& op = out_.model.ops[i];
    const bool streams = std::holds_alternative<ConvParams>(op.params) || std::holds_alternative<DeconvParams>(op.params) ||
                         std::holds_alternative<SdpParams>(op.params);
    if (streams && out_.model.tensors[op.inputs[0]].constant >= 0)
      bad(n, "computes on constants only, and the builder does not evaluate a " + n.op + " at build time, while the "
             "DLA's convolution and SDP engines read a computed tensor: fold this branch into an initializer before "
             "building (onnx-simplifier, or onnxruntime's graph optimizations with optimized_model_filepath), or make "
             "its input a graph input");
  }
}

// What an asymmetric activation Q/DQ pair's refusal suggests instead.
static const std::string kSymmetricActivations =
    " (onnxruntime's quantize_static: activation_type=QuantType.QInt8, extra_options={'ActivationSymmetric': True})";

// Q -> DQ on an activation: a tensor of its own holding the input rounded and saturated to the pair's
// scale, made by an op without steps (collapse_qdq_pairs folds it into its input where nothing else reads
// the input: the DLA then runs the pair implicitly, as the scale of that tensor). One QuantizeLinear may
// feed several DequantizeLinears of its scale: they all read the one tensor.
void Lowering::lower_qdq(Node& n) {
    const uint32_t in = tensor(n, n.inputs[0]);
    std::vector<Node*> dqs = g_.consumers(n.outputs[0]);
    const bool q_is_output = std::count(g_.outputs.begin(), g_.outputs.end(), n.outputs[0]) > 0;
    if (dqs.empty() || q_is_output || std::any_of(dqs.begin(), dqs.end(), [](const Node* c) { return c->op != "DequantizeLinear"; }))
      bad(n, "QuantizeLinear must be followed by DequantizeLinear (Q/DQ pair): its int8 output must be read only by "
             "DequantizeLinear nodes");
    const ConstData& scale = constant(n, 1, "the Q/DQ scale");
    if (scale.size() != 1) bad(n, "activations use per-tensor scales on the DLA");
    // A scale of 0, a negative one or a NaN has no INT8 meaning (ONNX Runtime's output is then 0 or NaN):
    // refused here, before it could read as "no scale" and the pair be dropped.
    const auto positive_finite = [](double s) { return s > 0 && std::isfinite(s); };
    const auto scale_text = [](double s) { std::ostringstream t; t << s; return t.str(); };
    if (!positive_finite(scale.at(0)))
      bad(n, "has a scale of " + scale_text(scale.at(0)) + "; a Q/DQ scale must be a positive finite number "
             "(the activation's range / 127)");
    // The DLA's INT8 is signed 8-bit, symmetric: a pair that quantizes to another type (uint8 is ONNX's
    // default when the zero point is left out), or whose DequantizeLinear uses another scale or zero
    // point, computes something else, so it is refused rather than read as int8.
    const int32_t type = g_.value(n.outputs[0]).elem_type;
    if (type != 3)
      bad(n, "quantizes to " + type_name(type) + "; DLA INT8 is int8 with zero point 0 (symmetric): quantize "
             "activations to int8 with zero points of 0 (onnxruntime: activation_type=QuantType.QInt8, "
             "extra_options={'ActivationSymmetric': True})");
    if (n.inputs.size() > 2 && !n.inputs[2].empty() && constant(n, 2, "the zero point").at(0) != 0)
      bad(n, "the DLA quantizes symmetrically: zero points must be 0" + kSymmetricActivations);
    for (Node* dq : dqs) {
      const ConstData& dq_scale = constant(*dq, 1, "the Q/DQ scale");
      if (dq_scale.size() == 1 && !positive_finite(dq_scale.at(0)))
        bad(*dq, "has a scale of " + scale_text(dq_scale.at(0)) + "; a Q/DQ scale must be a positive finite number");
      if (dq_scale.size() != 1 || float(dq_scale.at(0)) != float(scale.at(0)))
        bad(*dq, "dequantizes with another scale than its QuantizeLinear '" + n.name + "' quantized with; the DLA keeps one "
                 "scale per tensor: give the pair the same scale");
      if (dq->inputs.size() > 2 && !dq->inputs[2].empty() && constant(*dq, 2, "the zero point").at(0) != 0)
        bad(*dq, "the DLA quantizes symmetrically: zero points must be 0" + kSymmetricActivations);
    }
    const uint32_t y = new_tensor(dqs[0]->outputs[0], g_.value(dqs[0]->outputs[0]).dims);
    emit(n.name, {in}, y, SdpParams{});
    qdq_outputs_.insert(y);
    out_.qdq_amax[y] = float(amax_from_scale(scale.at(0)));
    for (Node* dq : dqs) {
      consumed_[dq] = true;
      out_.tensor_of[dq->outputs[0]] = y;
    }
}

void Lowering::lower_concat(Node& n) {
  // One input (DenseNet's first dense layer as exported): the output is the input, whatever the axis.
  if (n.inputs.size() == 1) return alias(n, n.inputs[0], n.outputs[0]);
  const Value& y = g_.value(n.outputs[0]);
  const int64_t axis = n.get_int("axis", 0);
  if (dla_axis(axis < 0 ? axis + int64_t(y.dims.size()) : axis, y.dims.size()) != 1)
    bad(n, "the DLA concatenates along the channel axis only: end the loadable before this node and concatenate "
           "on the host (a detector's decode usually starts here), or concatenate channels and reshape after");
  std::vector<uint32_t> ins;
  for (const std::string& s : n.inputs) ins.push_back(tensor(n, s));
  emit(n.name, ins, new_tensor(n.outputs[0], y.dims), ConcatParams{});
}

void Lowering::lower_softmax(Node& n) {
    const uint32_t in = tensor(n, n.inputs[0]);
    const Value& x = g_.value(n.inputs[0]);
    int64_t axis = n.get_int("axis", g_.opset >= 13 ? -1 : 1);
    if (axis < 0) axis += int64_t(x.dims.size());
    if (g_.opset < 13 && axis != int64_t(x.dims.size()) - 1) {
      for (size_t k = size_t(axis) + 1; k < x.dims.size(); ++k)
        if (x.dims[k] != 1) bad(n, "opset < 13 softmax flattens the trailing dimensions; not a DLA softmax");
    }
    const uint32_t a = dla_axis(axis, x.dims.size());
    if (a == 0) bad(n, "softmax over the batch dimension is not supported");
    emit(n.name, {in}, new_tensor(n.outputs[0], x.dims), SoftmaxParams{a});
}

void Lowering::lower_lrn(Node& n) {
  LrnParams p{uint32_t(n.get_int("size", 5)), float(n.get_float("alpha", 1e-4)), float(n.get_float("beta", 0.75)),
              float(n.get_float("bias", 1.0))};
  emit(n.name, {tensor(n, n.inputs[0])}, new_tensor(n.outputs[0], g_.value(n.outputs[0]).dims), p);
}

void Lowering::lower_abs(Node& n) {
  emit(n.name, {tensor(n, n.inputs[0])}, new_tensor(n.outputs[0], g_.value(n.outputs[0]).dims), UnaryParams{});
}

// Neg: the SDP's scale by -1 (as TensorRT runs it on the DLA), fused with what follows.
void Lowering::lower_neg(Node& n) {
  std::vector<SdpStep> steps{affine_step("Mul", {-1.f})};
  const std::string cur = fuse_activations(n.outputs[0], steps, true);
  SdpParams p;
  p.steps = steps;
  emit(n.name, {tensor(n, n.inputs[0])}, new_tensor(cur, g_.value(cur).dims), p);
}

// Standalone SDP: BN, activations.
void Lowering::lower_sdp(Node& n) {
  const std::string& op = n.op;
  const uint32_t in = tensor(n, n.inputs[0]);
  std::vector<SdpStep> steps;
  std::string cur = n.outputs[0];
  SdpStep s;
  if (op == "BatchNormalization") {
    for (size_t k = 1; k < 5; ++k) constant(n, k, "BatchNormalization parameters");
    const ConstData &gamma = *g_.value(n.inputs[1]).constant, &beta = *g_.value(n.inputs[2]).constant,
                    &mean = *g_.value(n.inputs[3]).constant, &var = *g_.value(n.inputs[4]).constant;
    const size_t channels = dla_shape(g_.value(n.inputs[0]).dims)[1];
    for (const ConstData* c : {&gamma, &beta, &mean, &var})
      if (c->size() != channels) bad(n, "parameters must have one value per channel");
    const double eps = n.get_float("epsilon", 1e-5);
    SdpStep scale, bias;
    scale.kind = SdpKind::kScale, bias.kind = SdpKind::kBias;
    for (size_t k = 0; k < gamma.size(); ++k) {
      const double sc = gamma.at(k) / std::sqrt(var.at(k) + eps);
      scale.fvalues.push_back(float(sc));
      bias.fvalues.push_back(float(beta.at(k) - mean.at(k) * sc));
    }
    steps = {scale, bias};
  } else if (op == "Relu" || op == "LeakyRelu" || op == "Clip" || op == "PRelu") {
    // fuse_activations starts from the input: re-run it as if this node followed an op.
    if (op == "Clip") {
      const auto [lo, hi] = clip_bounds(n);
      if (!std::isfinite(lo) && !std::isfinite(hi)) return alias(n, n.inputs[0], n.outputs[0]);
      s.kind = SdpKind::kClip;
      s.lo = std::isfinite(lo) ? float(lo) : -3.4e38f;
      s.hi = std::isfinite(hi) ? float(hi) : 3.4e38f;
    } else if (op == "Relu") {
      s.kind = SdpKind::kRelu;
    } else if (op == "LeakyRelu") {
      s.kind = SdpKind::kPRelu;
      s.fvalues = {float(n.get_float("alpha", 0.01))};
    } else {
      constant(n, 1, "the PRelu slope");
      s.kind = SdpKind::kPRelu;
      if (!same_dims(n.inputs[0], n.outputs[0]))
        bad(n, "the PRelu slope (shape " + dims_text(g_.value(n.inputs[1]).dims) + ") broadcasts the input (shape " +
                   dims_text(g_.value(n.inputs[0]).dims) + ") up to " + dims_text(g_.value(n.outputs[0]).dims) +
                   ", which the DLA cannot: its output has the input's shape");
      if (!channel_values(n.inputs[1], n.outputs[0], s.fvalues))
        bad(n, "the PRelu slope (shape " + dims_text(g_.value(n.inputs[1]).dims) + ") varies along an axis other than the "
               "channels of the input (shape " + dims_text(g_.value(n.inputs[0]).dims) + "): the DLA applies one slope, or "
               "one per channel; if it is per channel, shape it to broadcast along the channels alone ([C, 1, 1] for a 4-D input)");
    }
    steps = {s};
  } else if (op == "Sigmoid" || op == "Tanh") {
    s.kind = op == "Sigmoid" ? SdpKind::kSigmoid : SdpKind::kTanh;
    steps = {s};
  }
  if (op != "Sigmoid" && op != "Tanh") cur = fuse_activations(cur, steps, true);
  SdpParams p;
  p.steps = steps;
  emit(n.name, {in}, new_tensor(cur, g_.value(cur).dims), p);
}

}  // namespace

Lowered lower(Graph& g, Target target, std::vector<NodeIssue>* issues, bool fuse) {
  return Lowering(g, target, issues, fuse).run();
}

}  // namespace softdla::builder
