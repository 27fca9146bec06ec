// Model -> FlatBuffers. The writer refuses models that the reader would refuse, so every file it
// produces loads.
#include <fstream>

#include "error.h"
#include "format_version.h"
#include "io_layout.h"
#include "loadable.h"
#include "loadable_generated.h"
#include "memory_plan.h"
#include "model_checks.h"

namespace softdla {
namespace {

using Builder = flatbuffers::FlatBufferBuilder;

flatbuffers::Offset<fb::IoBinding> write_binding(Builder& b, const IoBinding& io) {
  const TensorDescriptor& d = io.desc;
  auto name = b.CreateString(d.name);
  auto stride = b.CreateVector(d.stride.data(), d.stride.size());
  return fb::CreateIoBinding(b, io.tensor, fb::TensorFormat(io.format), name, d.size, d.n, d.c, d.h,
                             d.w, d.data_format, d.data_type, d.data_category, d.pixel_format,
                             d.pixel_mapping, stride);
}

flatbuffers::Offset<fb::Sdp> write_sdp(Builder& b, const SdpParams& p) {
  std::vector<flatbuffers::Offset<fb::SdpStep>> steps;
  for (const SdpStep& s : p.steps) {
    auto fv = b.CreateVector(s.fvalues);
    auto iv = b.CreateVector(s.ivalues);
    steps.push_back(fb::CreateSdpStep(b, fb::SdpKind(s.kind), fv, iv, s.shift, s.lo, s.hi, s.lo_i,
                                      s.hi_i, s.tensor, s.tensor_multiplier, s.tensor_shift));
  }
  auto steps_v = b.CreateVector(steps);
  auto mult = b.CreateVector(p.requant.multiplier);
  auto shift = b.CreateVector(p.requant.shift);
  auto rq = fb::CreateRequant(b, mult, shift);
  return fb::CreateSdp(b, steps_v, rq, fb::ActivationLut(p.lut), p.lut_input_scale);
}

struct ParamsWriter {
  Builder& b;
  std::pair<fb::OpParams, flatbuffers::Offset<void>> operator()(const ConvParams& p) const {
    auto post = write_sdp(b, p.post);
    return {fb::OpParams::Conv,
            fb::CreateConv(b, p.weights, p.stride_h, p.stride_w, p.pad_top, p.pad_left,
                           p.pad_bottom, p.pad_right, p.dilation_h, p.dilation_w, p.groups, post)
                .Union()};
  }
  std::pair<fb::OpParams, flatbuffers::Offset<void>> operator()(const DeconvParams& p) const {
    auto post = write_sdp(b, p.post);
    return {fb::OpParams::Deconv,
            fb::CreateDeconv(b, p.weights, p.stride_h, p.stride_w, post).Union()};
  }
  std::pair<fb::OpParams, flatbuffers::Offset<void>> operator()(const SdpParams& p) const {
    return {fb::OpParams::Sdp, write_sdp(b, p).Union()};
  }
  std::pair<fb::OpParams, flatbuffers::Offset<void>> operator()(const PoolParams& p) const {
    return {fb::OpParams::Pool,
            fb::CreatePool(b, fb::PoolKind(p.kind), p.kernel_h, p.kernel_w, p.stride_h, p.stride_w,
                           p.pad_top, p.pad_left, p.pad_bottom, p.pad_right, p.exclude_padding)
                .Union()};
  }
  std::pair<fb::OpParams, flatbuffers::Offset<void>> operator()(const LrnParams& p) const {
    return {fb::OpParams::Lrn, fb::CreateLrn(b, p.size, p.alpha, p.beta, p.bias).Union()};
  }
  std::pair<fb::OpParams, flatbuffers::Offset<void>> operator()(const ResizeParams& p) const {
    return {fb::OpParams::Resize,
            fb::CreateResize(b, fb::ResizeMode(p.mode), p.scale_h, p.scale_w,
                             fb::NearestRounding(p.nearest))
                .Union()};
  }
  std::pair<fb::OpParams, flatbuffers::Offset<void>> operator()(const ConcatParams&) const {
    return {fb::OpParams::Concat, fb::CreateConcat(b).Union()};
  }
  std::pair<fb::OpParams, flatbuffers::Offset<void>> operator()(const SliceParams& p) const {
    return {fb::OpParams::Slice, fb::CreateSlice(b, b.CreateVector(p.start.data(), 4)).Union()};
  }
  std::pair<fb::OpParams, flatbuffers::Offset<void>> operator()(const ShuffleParams& p) const {
    return {fb::OpParams::Shuffle, fb::CreateShuffle(b, b.CreateVector(p.perm.data(), 4)).Union()};
  }
  std::pair<fb::OpParams, flatbuffers::Offset<void>> operator()(const SoftmaxParams& p) const {
    return {fb::OpParams::Softmax, fb::CreateSoftmax(b, p.axis).Union()};
  }
  std::pair<fb::OpParams, flatbuffers::Offset<void>> operator()(const UnaryParams& p) const {
    return {fb::OpParams::Unary, fb::CreateUnary(b, fb::UnaryKind(p.kind)).Union()};
  }
  std::pair<fb::OpParams, flatbuffers::Offset<void>> operator()(const ReduceMaxParams& p) const {
    return {fb::OpParams::ReduceMax, fb::CreateReduceMax(b, b.CreateVector(p.axes)).Union()};
  }
  std::pair<fb::OpParams, flatbuffers::Offset<void>> operator()(const ConvertParams&) const {
    return {fb::OpParams::Convert, fb::CreateConvert(b).Union()};
  }
};

}  // namespace

void finalize_model(Model& m) {
  m.version = {kFormatMajor, kFormatMinor, kFormatPatch};
  if (m.build_info.builder.empty()) m.build_info.builder = std::string("softdla ") + kSoftdlaVersion;
  // Descriptors are derived, never hand-written: fill them from shape, type and format.
  for (auto* list : {&m.inputs, &m.outputs})
    for (IoBinding& io : *list) {
      if (io.tensor >= m.tensors.size()) fail("I/O binding names tensor ", io.tensor, " of ", m.tensors.size());
      const Tensor& t = m.tensors[io.tensor];
      io.desc = io_descriptor(t.name, t.shape, t.dtype, io.format, m.target);
    }
  check_graph(m);
  if (m.memory_plan.offsets.empty()) m.memory_plan = plan_memory(m);
  check_memory_plan(m);
}

std::vector<uint8_t> write_loadable(Model m) {
  finalize_model(m);

  Builder b(1 << 16);
  std::vector<flatbuffers::Offset<fb::Tensor>> tensors;
  for (const Tensor& t : m.tensors)
    tensors.push_back(fb::CreateTensor(b, b.CreateString(t.name), b.CreateVector(t.shape.data(), 4),
                                       fb::DataType(t.dtype), t.scale, t.constant));
  std::vector<flatbuffers::Offset<fb::Constant>> constants;
  for (const Constant& c : m.constants) {
    auto dims = b.CreateVector(c.dims);
    b.ForceVectorAlignment(c.data.size(), 1, 16);
    auto data = b.CreateVector(c.data);
    constants.push_back(fb::CreateConstant(b, fb::DataType(c.dtype), dims, data));
  }
  std::vector<flatbuffers::Offset<fb::IoBinding>> inputs, outputs;
  for (const IoBinding& io : m.inputs) inputs.push_back(write_binding(b, io));
  for (const IoBinding& io : m.outputs) outputs.push_back(write_binding(b, io));
  std::vector<flatbuffers::Offset<fb::Op>> ops;
  for (const Op& op : m.ops) {
    auto [type, params] = std::visit(ParamsWriter{b}, op.params);
    ops.push_back(fb::CreateOp(b, b.CreateString(op.name), b.CreateVector(op.inputs),
                               b.CreateVector(op.outputs), type, params));
  }
  auto plan = fb::CreateMemoryPlan(b, b.CreateVector(m.memory_plan.offsets), m.memory_plan.arena_size);
  auto info = fb::CreateBuildInfo(b, b.CreateString(m.build_info.builder),
                                  b.CreateString(m.build_info.source_model_sha256),
                                  b.CreateString(m.build_info.precisions),
                                  b.CreateString(m.build_info.flags));
  fb::Version version(m.version.major, m.version.minor, m.version.patch);
  auto root = fb::CreateLoadable(b, &version, fb::Target(m.target), b.CreateVector(tensors),
                                 b.CreateVector(constants), b.CreateVector(inputs),
                                 b.CreateVector(outputs), b.CreateVector(ops), plan, info);
  fb::FinishLoadableBuffer(b, root);
  return {b.GetBufferPointer(), b.GetBufferPointer() + b.GetSize()};
}

void write_loadable_file(const Model& model, const std::string& path) {
  const std::vector<uint8_t> bytes = write_loadable(model);
  std::ofstream f(path, std::ios::binary);
  if (!f) fail("cannot write '", path, "'");
  f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  if (!f) fail("failed writing '", path, "'");
}

}  // namespace softdla
