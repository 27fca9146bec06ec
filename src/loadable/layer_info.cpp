#include "layer_info.h"

#include <type_traits>
#include <variant>

#include "json_writer.h"
#include "model_checks.h"

namespace softdla {

namespace {

LayerTensorInfo tensor_info(const Model& m, uint32_t t) {
  const Tensor& x = m.tensors[t];
  LayerTensorInfo i;
  i.name = x.name;
  i.shape = x.shape;
  i.dtype = to_string(x.dtype);
  i.scale = x.scale;
  i.constant = x.constant >= 0;
  i.bytes = element_count(x.shape) * element_size(x.dtype);
  return i;
}

LayerParam int_param(const char* key, int64_t v) {
  LayerParam p;
  p.type = LayerParam::Type::kInt, p.key = key, p.i = v;
  return p;
}
template <class C>
LayerParam ints_param(const char* key, const C& values) {
  LayerParam p;
  p.type = LayerParam::Type::kInts, p.key = key;
  for (auto v : values) p.ints.push_back(int64_t(v));
  return p;
}
LayerParam float_param(const char* key, float v) {
  LayerParam p;
  p.type = LayerParam::Type::kFloat, p.key = key, p.f = json_float_value(v);
  return p;
}
LayerParam string_param(const char* key, std::string v) {
  LayerParam p;
  p.type = LayerParam::Type::kString, p.key = key, p.s = std::move(v);
  return p;
}
LayerParam bool_param(const char* key, bool v) {
  LayerParam p;
  p.type = LayerParam::Type::kBool, p.key = key, p.b = v;
  return p;
}

// The kernel, stride, pad, dilation, groups (and out_channels) entries of conv, deconv and pool.
void add_geometry(LayerInfo& l) {
  l.params.push_back(ints_param("kernel", l.kernel));
  l.params.push_back(ints_param("stride", l.stride));
  l.params.push_back(ints_param("pad", l.pad));
}

// The INT8 builder's first step of an element-wise op: a move to an integer domain 2^16 finer than the
// input's (precision.cpp, int8_sdp), not a stage of the network.
bool is_domain_step(const SdpStep& s, size_t position, DataType precision) {
  return position == 0 && precision == DataType::kInt8 && s.kind == SdpKind::kScale && s.fvalues.empty() &&
         s.ivalues.size() == 1 && s.ivalues[0] == (1 << 16) && s.shift == 0 && s.tensor < 0;
}

bool requantizes(const Requant& r) {
  for (size_t k = 0; k < r.multiplier.size(); ++k)
    if (r.multiplier[k] != 1 || (k < r.shift.size() && r.shift[k] != 0)) return true;
  return false;
}

// The SDP stages of `p` in the order they run, named as in LayerInfo::fused.
std::vector<std::string> sdp_stages(const SdpParams& p, DataType precision) {
  std::vector<std::string> s;
  for (size_t k = 0; k < p.steps.size(); ++k)
    if (!is_domain_step(p.steps[k], k, precision)) s.push_back(to_string(p.steps[k].kind));
  if (p.lut == ActivationLut::kSigmoid) s.push_back("sigmoid-lut");
  if (p.lut == ActivationLut::kTanh) s.push_back("tanh-lut");
  if (requantizes(p.requant)) s.push_back("requantize");
  return s;
}

uint64_t sdp_param_bytes(const SdpParams& p) {
  uint64_t b = 0;
  for (const SdpStep& s : p.steps) b += 4 * (s.fvalues.size() + s.ivalues.size());
  return b + 4 * p.requant.multiplier.size() + p.requant.shift.size();
}

const char* resize_rounding(NearestRounding r) {
  switch (r) {
    case NearestRounding::kAsymmetricFloor: return "asymmetric_floor";
    case NearestRounding::kHalfPixelRoundDown: return "half_pixel_round_down";
    case NearestRounding::kHalfPixelRoundUp: return "half_pixel_round_up";
  }
  return "?";
}

LayerInfo describe(const Model& m, uint32_t index) {
  const Op& op = m.ops[index];
  LayerInfo l;
  l.index = index;
  l.name = op.name;
  l.op = op_kind_name(op.params);
  const DataType precision = m.tensors[op.outputs[0]].dtype;
  l.precision = to_string(precision);
  uint64_t out_elements = 0;
  for (uint32_t t : op.inputs) {
    l.inputs.push_back(tensor_info(m, t));
    const Tensor& x = m.tensors[t];
    if (x.constant >= 0) l.weight_bytes += m.constants[size_t(x.constant)].data.size();
    else l.input_bytes += l.inputs.back().bytes;
  }
  for (uint32_t t : op.outputs) {
    l.outputs.push_back(tensor_info(m, t));
    l.output_bytes += l.outputs.back().bytes;
    out_elements += element_count(m.tensors[t].shape);
  }
  const Shape in = m.tensors[op.inputs[0]].shape, out = m.tensors[op.outputs[0]].shape;
  std::visit(
      [&](const auto& p) {
        using T = std::decay_t<decltype(p)>;
        if constexpr (std::is_same_v<T, ConvParams>) {
          const Constant& w = m.constants[p.weights];  // [K, C/groups, kh, kw] (model_checks.cpp)
          l.kernel = {w.dims[2], w.dims[3]};
          l.stride = {p.stride_h, p.stride_w};
          l.pad = {p.pad_top, p.pad_left, p.pad_bottom, p.pad_right};
          l.dilation = {p.dilation_h, p.dilation_w};
          l.groups = p.groups;
          l.out_channels = w.dims[0];
          l.weight_bytes += w.data.size() + sdp_param_bytes(p.post);
          l.fused = sdp_stages(p.post, precision);
          l.macs = uint64_t(out[0]) * out[1] * out[2] * out[3] * w.dims[1] * w.dims[2] * w.dims[3];
        } else if constexpr (std::is_same_v<T, DeconvParams>) {
          const Constant& w = m.constants[p.weights];  // [C, K, kh, kw]
          l.kernel = {w.dims[2], w.dims[3]};
          l.stride = {p.stride_h, p.stride_w};
          l.out_channels = w.dims[1];
          l.weight_bytes += w.data.size() + sdp_param_bytes(p.post);
          l.fused = sdp_stages(p.post, precision);
          l.macs = element_count(in) * w.dims[1] * w.dims[2] * w.dims[3];
        } else if constexpr (std::is_same_v<T, PoolParams>) {
          l.kernel = {p.kernel_h, p.kernel_w};
          l.stride = {p.stride_h, p.stride_w};
          l.pad = {p.pad_top, p.pad_left, p.pad_bottom, p.pad_right};
          l.macs = out_elements;
        } else if constexpr (std::is_same_v<T, SdpParams>) {
          l.weight_bytes += sdp_param_bytes(p);
          std::vector<std::string> stages = sdp_stages(p, precision);
          // The op's operation: its element-wise stage where it has one, else its first stage.
          size_t main = 0;
          for (size_t k = 0; k < stages.size(); ++k)
            if (stages[k] == "add" || stages[k] == "sub" || stages[k] == "mul" || stages[k] == "max" ||
                stages[k] == "min" || stages[k] == "div") {
              main = k;
              break;
            }
          std::string operation = stages.empty() ? "none" : stages[main];
          if (!stages.empty()) stages.erase(stages.begin() + std::ptrdiff_t(main));
          if (operation == "sigmoid-lut" || operation == "tanh-lut") operation.resize(operation.size() - 4);
          l.params.push_back(string_param("operation", operation));
          l.fused = std::move(stages);
          l.macs = out_elements;
        } else if constexpr (std::is_same_v<T, LrnParams>) {
          l.params.push_back(int_param("size", p.size));
          l.params.push_back(float_param("alpha", p.alpha));
          l.params.push_back(float_param("beta", p.beta));
          l.params.push_back(float_param("bias", p.bias));
          l.macs = out_elements;
        } else if constexpr (std::is_same_v<T, ResizeParams>) {
          l.params.push_back(string_param("mode", p.mode == ResizeMode::kBilinear ? "bilinear" : "nearest"));
          l.params.push_back(ints_param("scale", std::array<uint32_t, 2>{p.scale_h, p.scale_w}));
          if (p.mode == ResizeMode::kNearest) l.params.push_back(string_param("nearest_rounding", resize_rounding(p.nearest)));
          l.macs = out_elements;
        } else if constexpr (std::is_same_v<T, ConcatParams>) {
          l.params.push_back(int_param("axis", 1));  // the DLA concatenates channels only
        } else if constexpr (std::is_same_v<T, SliceParams>) {
          l.params.push_back(ints_param("start", p.start));
        } else if constexpr (std::is_same_v<T, ShuffleParams>) {
          l.params.push_back(ints_param("perm", p.perm));
        } else if constexpr (std::is_same_v<T, SoftmaxParams>) {
          l.params.push_back(int_param("axis", p.axis));
          l.macs = out_elements;
        } else if constexpr (std::is_same_v<T, UnaryParams>) {
          l.params.push_back(string_param("operation", "abs"));
          l.macs = out_elements;
        } else if constexpr (std::is_same_v<T, ReduceMaxParams>) {
          l.params.push_back(ints_param("axes", p.axes));
          l.macs = out_elements;
        } else if constexpr (std::is_same_v<T, ConvertParams>) {
          l.params.push_back(string_param("from", to_string(m.tensors[op.inputs[0]].dtype)));
          l.params.push_back(string_param("to", to_string(precision)));
        }
        if constexpr (std::is_same_v<T, ConvParams> || std::is_same_v<T, DeconvParams>) {
          add_geometry(l);
          l.params.push_back(ints_param("dilation", l.dilation));
          l.params.push_back(int_param("groups", l.groups));
          l.params.push_back(int_param("out_channels", l.out_channels));
        } else if constexpr (std::is_same_v<T, PoolParams>) {
          l.params.insert(l.params.begin(), string_param("type", p.kind == PoolKind::kMax ? "max" : "avg"));
          add_geometry(l);
          l.params.push_back(bool_param("exclude_padding", p.exclude_padding));
        }
      },
      op.params);
  return l;
}

void write_tensors(JsonWriter& w, const std::vector<LayerTensorInfo>& list) {
  w.begin_array();
  for (const LayerTensorInfo& t : list) {
    w.begin_object().field("name", t.name);
    w.key("shape").begin_array();
    for (uint32_t d : t.shape) w.value(d);
    w.end_array();
    w.field("dtype", t.dtype).field("scale", t.scale).end_object();
  }
  w.end_array();
}

}  // namespace

const LayerParam* find_param(const LayerInfo& l, const std::string& key) {
  for (const LayerParam& p : l.params)
    if (p.key == key) return &p;
  return nullptr;
}

std::vector<LayerInfo> describe_layers(const Model& m) {
  std::vector<LayerInfo> out;
  out.reserve(m.ops.size());
  for (uint32_t i = 0; i < m.ops.size(); ++i) out.push_back(describe(m, i));
  return out;
}

void write_layer_info(JsonWriter& w, const LayerInfo& l) {
  w.begin_object();
  w.field("index", l.index).field("name", l.name).field("op", l.op).field("precision", l.precision);
  w.key("inputs");
  write_tensors(w, l.inputs);
  w.key("outputs");
  write_tensors(w, l.outputs);
  w.key("params").begin_object();
  for (const LayerParam& p : l.params) {
    w.key(p.key);
    switch (p.type) {
      case LayerParam::Type::kInt: w.value(p.i); break;
      case LayerParam::Type::kInts:
        w.begin_array();
        for (int64_t v : p.ints) w.value(v);
        w.end_array();
        break;
      case LayerParam::Type::kFloat: w.value(p.f); break;
      case LayerParam::Type::kString: w.value(p.s); break;
      case LayerParam::Type::kBool: w.value(p.b); break;
    }
  }
  w.end_object();
  w.key("fused").begin_array();
  for (const std::string& f : l.fused) w.value(f);
  w.end_array();
  w.field("weight_bytes", l.weight_bytes).field("macs", l.macs);
  w.field("input_bytes", l.input_bytes).field("output_bytes", l.output_bytes);
  w.end_object();
}

void write_layer_info(JsonWriter& w, const std::vector<LayerInfo>& layers) {
  w.begin_array();
  for (const LayerInfo& l : layers) write_layer_info(w, l);
  w.end_array();
}

std::string layer_info_json(const Model& m, int indent) {
  JsonWriter w(indent);
  write_layer_info(w, describe_layers(m));
  return w.str();
}

std::vector<MemoryPlanEntry> describe_memory_plan(const Model& m) {
  const std::vector<TensorLifetime> life = tensor_lifetimes(m);
  const std::vector<bool> inter = intermediate_mask(m);
  std::vector<MemoryPlanEntry> plan;
  for (const Op& op : m.ops)
    for (uint32_t t : op.outputs) {
      if (!inter[t]) continue;
      const Tensor& tensor = m.tensors[t];
      plan.push_back({tensor.name, m.memory_plan.offsets[t], element_count(tensor.shape) * element_size(tensor.dtype),
                      int32_t(life[t].first), int32_t(life[t].last)});
    }
  return plan;
}

void write_memory_plan(JsonWriter& w, const std::vector<MemoryPlanEntry>& plan) {
  w.begin_array();
  for (const MemoryPlanEntry& e : plan)
    w.begin_object().field("tensor", e.tensor).field("offset", e.offset).field("bytes", e.bytes)
        .field("first_op", e.first_op).field("last_op", e.last_op).end_object();
  w.end_array();
}

}  // namespace softdla
