// softdla inspect.
#include <iomanip>
#include <iostream>

#include "builder.h"
#include "commands.h"
#include "error.h"
#include "file_bytes.h"
#include "io_layout.h"
#include "json_writer.h"
#include "layer_info.h"
#include "loadable.h"

namespace softdla::cli {

namespace {

// softdla.inspect()'s dict as JSON: the same keys and values (src/python/builder_ext.cpp).
std::string inspect_json(const Model& m) {
  JsonWriter w;
  w.begin_object();
  w.field("format_version", std::to_string(m.version.major) + "." + std::to_string(m.version.minor) + "." +
                                std::to_string(m.version.patch));
  w.field("target", to_string(m.target)).field("builder", m.build_info.builder);
  w.field("precisions", m.build_info.precisions).field("flags", m.build_info.flags);
  w.field("source_model_sha256", m.build_info.source_model_sha256);
  auto io = [&](const char* key, const std::vector<IoBinding>& list) {
    w.key(key).begin_array();
    for (const IoBinding& b : list) {
      const Tensor& t = m.tensors[b.tensor];
      w.begin_object().field("name", t.name);
      w.key("shape").begin_array();
      for (uint32_t d : t.shape) w.value(d);
      w.end_array();
      w.field("dtype", to_string(t.dtype)).field("format", to_string(b.format)).field("scale", t.scale);
      w.field("size", b.desc.size);
      w.key("strides").begin_array();
      for (size_t k = 0; k < 4; ++k) w.value(b.desc.stride[k]);
      w.end_array().end_object();
    }
    w.end_array();
  };
  io("inputs", m.inputs);
  io("outputs", m.outputs);
  w.key("layers").begin_array();
  for (const Op& op : m.ops)
    w.begin_array().value(op.name).value(op_kind_name(op.params)).value(to_string(m.tensors[op.outputs[0]].dtype)).end_array();
  w.end_array();
  w.field("arena_bytes", m.memory_plan.arena_size);
  w.key("memory_plan");
  write_memory_plan(w, describe_memory_plan(m));
  w.key("layer_info");
  write_layer_info(w, describe_layers(m));
  w.end_object();
  return w.str();
}

}  // namespace

int print_check_json(const std::string& model_path, const std::string& target, const std::vector<builder::CheckRow>& rows) {
  JsonWriter w;
  size_t supported = 0;
  w.begin_object().field("model", model_path).field("target", target);
  w.key("nodes").begin_array();
  for (const builder::CheckRow& r : rows) {
    supported += r.supported;
    w.begin_object().field("node", r.node).field("op", r.op).field("dla", r.supported).field("reason", r.reason).end_object();
  }
  w.end_array();
  w.field("supported", supported).field("unsupported", rows.size() - supported).end_object();
  std::cout << w.str() << "\n";
  return supported == rows.size() ? 0 : 1;
}

int inspect_command(const std::string& path, bool json) {
  const Model m = read_loadable(read_file_bytes(path, "loadable", kMaxModelFileBytes));
  if (json) {
    std::cout << inspect_json(m) << "\n";
    return 0;
  }
  std::cout << "loadable " << path << "\n  format " << m.version.major << "." << m.version.minor << "." << m.version.patch
            << ", target " << to_string(m.target) << ", built by '" << m.build_info.builder << "'\n";
  if (!m.build_info.precisions.empty()) std::cout << "  precisions: " << m.build_info.precisions << "\n";
  if (!m.build_info.source_model_sha256.empty())
    std::cout << "  source model sha256: " << m.build_info.source_model_sha256 << "\n";
  if (!m.build_info.flags.empty()) std::cout << "  flags: " << m.build_info.flags << "\n";
  auto print_io = [&](const char* kind, const std::vector<IoBinding>& list) {
    for (const IoBinding& io : list) {
      const TensorDescriptor& d = io.desc;
      const Tensor& t = m.tensors[io.tensor];
      std::cout << "  " << kind << " '" << t.name << "' " << d.n << "x" << d.c << "x" << d.h << "x" << d.w << " "
                << to_string(t.dtype) << ":" << to_string(io.format) << " size " << d.size << " B, strides "
                << d.stride[0] << "/" << d.stride[1] << "/" << d.stride[2] << "/" << d.stride[3];
      if (t.dtype == DataType::kInt8) std::cout << ", scale " << t.scale;
      std::cout << "\n";
    }
  };
  print_io("input ", m.inputs);
  print_io("output", m.outputs);
  std::cout << "  " << m.ops.size() << " ops, intermediate arena " << m.memory_plan.arena_size << " B\n";
  for (const Op& op : m.ops) {
    const Tensor& out = m.tensors[op.outputs[0]];
    std::string fused;
    const SdpParams* post = nullptr;
    if (const auto* c = std::get_if<ConvParams>(&op.params)) post = &c->post;
    if (const auto* d = std::get_if<DeconvParams>(&op.params)) post = &d->post;
    if (const auto* sdp = std::get_if<SdpParams>(&op.params)) post = sdp;
    if (post) {
      for (const SdpStep& st : post->steps) fused += std::string(fused.empty() ? " [" : "+") + to_string(st.kind);
      if (post->lut != ActivationLut::kNone) fused += std::string(fused.empty() ? " [" : "+") + (post->lut == ActivationLut::kSigmoid ? "sigmoid-lut" : "tanh-lut");
      if (!fused.empty()) fused += "]";
    }
    std::cout << "    " << std::left << std::setw(10) << op_kind_name(op.params) << " " << std::setw(6)
              << to_string(out.dtype) << " " << op.name << fused << " -> " << out.name << "\n";
  }
  return 0;
}

}  // namespace softdla::cli
