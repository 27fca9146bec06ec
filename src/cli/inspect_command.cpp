// softdla inspect.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <random>
#include <sstream>

#include "commands.h"
#include "engine.h"
#include "error.h"
#include "file_bytes.h"
#include "io_convert.h"
#include "io_layout.h"
#include "loadable.h"
#include "npy.h"
#include "numerics.h"

namespace softdla::cli {

int inspect_command(const std::string& path) {
  const Model m = read_loadable(read_file_bytes(path, "loadable", kMaxModelFileBytes));
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
      std::cout << "  " << kind << " '" << d.name << "' " << d.n << "x" << d.c << "x" << d.h << "x" << d.w << " "
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
