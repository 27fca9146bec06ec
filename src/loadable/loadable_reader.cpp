// FlatBuffers -> Model. Only verified buffers are read; everything is copied out so the caller's buffer
// may be freed right after loading.
#include <cstring>

#include "error.h"
#include "format_version.h"
#include "loadable.h"
#include "loadable_generated.h"
#include "log.h"
#include "model_checks.h"

namespace softdla {
namespace {

template <class T, class V>
std::vector<T> to_vec(const flatbuffers::Vector<V>* v) {
  std::vector<T> out;
  if (v) out.assign(v->begin(), v->end());
  return out;
}

std::string to_str(const flatbuffers::String* s) { return s ? s->str() : std::string(); }

template <class E>
E checked_enum(int value, int max, const char* what) {
  if (value < 0 || value > max) fail(what, " has unknown value ", value);
  return E(value);
}

DataType read_dtype(fb::DataType t) {
  return checked_enum<DataType>(int(t), int(fb::DataType::MAX), "data type");
}

Shape read_shape(const flatbuffers::Vector<uint32_t>* v, const std::string& what) {
  if (!v || v->size() != 4) fail(what, ": shape must have exactly 4 dims (N, C, H, W)");
  return {v->Get(0), v->Get(1), v->Get(2), v->Get(3)};
}

IoBinding read_binding(const fb::IoBinding* b) {
  if (!b) fail("null I/O binding");
  IoBinding io;
  io.tensor = b->tensor();
  io.format = checked_enum<TensorFormat>(int(b->format()), int(fb::TensorFormat::MAX), "I/O format");
  TensorDescriptor& d = io.desc;
  d.name = to_str(b->name());
  d.size = b->size();
  d.n = b->n(), d.c = b->c(), d.h = b->h(), d.w = b->w();
  d.data_format = b->data_format();
  d.data_type = b->data_type();
  d.data_category = b->data_category();
  d.pixel_format = b->pixel_format();
  d.pixel_mapping = b->pixel_mapping();
  const auto* st = b->stride();
  if (!st || st->size() != 8) fail("I/O binding '", d.name, "': stride must have 8 entries");
  for (size_t i = 0; i < 8; ++i) d.stride[i] = st->Get(uint32_t(i));
  return io;
}

SdpParams read_sdp(const fb::Sdp* s) {
  SdpParams p;
  if (!s) return p;
  if (s->steps()) {
    for (const fb::SdpStep* st : *s->steps()) {
      if (!st) fail("null SDP step");
      SdpStep step;
      step.kind = checked_enum<SdpKind>(int(st->kind()), int(fb::SdpKind::MAX), "SDP step kind");
      step.fvalues = to_vec<float>(st->fvalues());
      step.ivalues = to_vec<int32_t>(st->ivalues());
      step.shift = st->shift();
      step.lo = st->lo(), step.hi = st->hi();
      step.lo_i = st->lo_i(), step.hi_i = st->hi_i();
      step.tensor = st->tensor();
      step.tensor_multiplier = st->tensor_multiplier();
      step.tensor_shift = st->tensor_shift();
      p.steps.push_back(std::move(step));
    }
  }
  if (s->requant()) {
    p.requant.multiplier = to_vec<int32_t>(s->requant()->multiplier());
    p.requant.shift = to_vec<uint8_t>(s->requant()->shift());
  }
  p.lut = checked_enum<ActivationLut>(int(s->lut()), int(fb::ActivationLut::MAX), "activation LUT");
  p.lut_input_scale = s->lut_input_scale();
  return p;
}

OpParams read_params(const fb::Op* op) {
  // A union whose type is set but whose table is absent passes the FlatBuffers verifier; every kernel
  // reads its table, so an op without one is a corrupt loadable, not "default parameters".
  if (op->params_type() != fb::OpParams::NONE && !op->params())
    fail("op '", to_str(op->name()), "' declares ", fb::EnumNameOpParams(op->params_type()),
         " parameters but carries no parameter table; the loadable is corrupt, rebuild it");
  switch (op->params_type()) {
    case fb::OpParams::Conv: {
      const fb::Conv* c = op->params_as_Conv();
      ConvParams p;
      p.weights = c->weights();
      p.stride_h = c->stride_h(), p.stride_w = c->stride_w();
      p.pad_top = c->pad_top(), p.pad_left = c->pad_left();
      p.pad_bottom = c->pad_bottom(), p.pad_right = c->pad_right();
      p.dilation_h = c->dilation_h(), p.dilation_w = c->dilation_w();
      p.groups = c->groups();
      p.post = read_sdp(c->post());
      return p;
    }
    case fb::OpParams::Deconv: {
      const fb::Deconv* c = op->params_as_Deconv();
      DeconvParams p;
      p.weights = c->weights();
      p.stride_h = c->stride_h(), p.stride_w = c->stride_w();
      p.post = read_sdp(c->post());
      return p;
    }
    case fb::OpParams::Sdp: return read_sdp(op->params_as_Sdp());
    case fb::OpParams::Pool: {
      const fb::Pool* c = op->params_as_Pool();
      PoolParams p;
      p.kind = checked_enum<PoolKind>(int(c->kind()), int(fb::PoolKind::MAX), "pool kind");
      p.kernel_h = c->kernel_h(), p.kernel_w = c->kernel_w();
      p.stride_h = c->stride_h(), p.stride_w = c->stride_w();
      p.pad_top = c->pad_top(), p.pad_left = c->pad_left();
      p.pad_bottom = c->pad_bottom(), p.pad_right = c->pad_right();
      p.exclude_padding = c->exclude_padding();
      return p;
    }
    case fb::OpParams::Lrn: {
      const fb::Lrn* c = op->params_as_Lrn();
      return LrnParams{c->size(), c->alpha(), c->beta(), c->bias()};
    }
    case fb::OpParams::Resize: {
      const fb::Resize* c = op->params_as_Resize();
      ResizeParams p;
      p.mode = checked_enum<ResizeMode>(int(c->mode()), int(fb::ResizeMode::MAX), "resize mode");
      p.scale_h = c->scale_h(), p.scale_w = c->scale_w();
      p.nearest = checked_enum<NearestRounding>(int(c->nearest()), int(fb::NearestRounding::MAX),
                                                "nearest rounding");
      return p;
    }
    case fb::OpParams::Concat: return ConcatParams{};
    case fb::OpParams::Slice: {
      SliceParams p;
      p.start = read_shape(op->params_as_Slice()->start(), "slice start");
      return p;
    }
    case fb::OpParams::Shuffle: {
      ShuffleParams p;
      Shape perm = read_shape(op->params_as_Shuffle()->perm(), "shuffle perm");
      for (int i = 0; i < 4; ++i) p.perm[i] = perm[i];
      return p;
    }
    case fb::OpParams::Softmax: return SoftmaxParams{op->params_as_Softmax()->axis()};
    case fb::OpParams::Unary:
      return UnaryParams{checked_enum<UnaryKind>(int(op->params_as_Unary()->kind()),
                                                 int(fb::UnaryKind::MAX), "unary kind")};
    case fb::OpParams::ReduceMax:
      return ReduceMaxParams{to_vec<uint32_t>(op->params_as_ReduceMax()->axes())};
    case fb::OpParams::Convert: return ConvertParams{};
    default: break;
  }
  fail("op '", to_str(op->name()), "' has unknown or missing parameters (type ",
       int(op->params_type()), ")");
}

}  // namespace

Model read_loadable(std::span<const uint8_t> bytes) {
  if (bytes.size() < 8) fail("loadable is ", bytes.size(), " bytes: too short to be a loadable");
  // FlatBuffers aligns 8-byte data relative to the buffer start; read from an 8-aligned copy when the
  // caller's buffer is not (a loadable embedded at any offset of a larger file must still load).
  if (reinterpret_cast<uintptr_t>(bytes.data()) % alignof(uint64_t) != 0) {
    std::vector<uint64_t> aligned((bytes.size() + 7) / 8);
    std::memcpy(aligned.data(), bytes.data(), bytes.size());
    return read_loadable({reinterpret_cast<const uint8_t*>(aligned.data()), bytes.size()});
  }
  if (!fb::LoadableBufferHasIdentifier(bytes.data()))
    fail("not a softdla loadable (file identifier 'SDLA' missing); is this a TensorRT engine or "
         "another file?");
  flatbuffers::Verifier::Options opts;
  opts.max_depth = 16;
  opts.max_tables = 10'000'000;
  flatbuffers::Verifier verifier(bytes.data(), bytes.size(), opts);
  if (!fb::VerifyLoadableBuffer(verifier))
    fail("loadable is corrupt or truncated (FlatBuffers verification failed)");
  const fb::Loadable* l = fb::GetLoadable(bytes.data());

  Model m;
  if (!l->version()) fail("loadable has no format version");
  m.version = {l->version()->major(), l->version()->minor(), l->version()->patch()};
  if (m.version.major != kFormatMajor)
    fail("loadable format version ", m.version.major, ".", m.version.minor,
         " is not supported (this softdla reads ", kFormatMajor, ".x); rebuild the loadable with "
         "this softdla's builder");
  if (m.version.minor > kFormatMinor)
    log(LogLevel::kWarn, "loadable format 1.", m.version.minor, " is newer than this reader (1.",
        kFormatMinor, "); fields it does not know are ignored");
  m.target = checked_enum<Target>(int(l->target()), int(fb::Target::MAX), "target");

  if (l->tensors())
    for (const fb::Tensor* t : *l->tensors()) {
      if (!t) fail("null tensor entry");
      Tensor x;
      x.name = to_str(t->name());
      x.shape = read_shape(t->shape(), "tensor '" + x.name + "'");
      x.dtype = read_dtype(t->dtype());
      x.scale = t->scale();
      x.constant = t->constant();
      m.tensors.push_back(std::move(x));
    }
  if (l->constants())
    for (const fb::Constant* c : *l->constants()) {
      if (!c) fail("null constant entry");
      Constant k;
      k.dtype = read_dtype(c->dtype());
      k.dims = to_vec<uint32_t>(c->dims());
      k.data = to_vec<uint8_t>(c->data());
      m.constants.push_back(std::move(k));
    }
  if (l->inputs())
    for (const fb::IoBinding* b : *l->inputs()) m.inputs.push_back(read_binding(b));
  if (l->outputs())
    for (const fb::IoBinding* b : *l->outputs()) m.outputs.push_back(read_binding(b));
  if (l->ops())
    for (const fb::Op* o : *l->ops()) {
      if (!o) fail("null op entry");
      Op op;
      op.name = to_str(o->name());
      op.inputs = to_vec<uint32_t>(o->inputs());
      op.outputs = to_vec<uint32_t>(o->outputs());
      op.params = read_params(o);
      m.ops.push_back(std::move(op));
    }
  if (l->memory_plan()) {
    // The verifier checks vector lengths for 4-byte alignment only; 8-byte elements need their own check.
    if (const auto* offs = l->memory_plan()->offsets();
        offs && reinterpret_cast<uintptr_t>(offs->Data()) % alignof(uint64_t) != 0)
      fail("loadable is corrupt: memory plan offsets are misaligned");
    m.memory_plan.offsets = to_vec<uint64_t>(l->memory_plan()->offsets());
    m.memory_plan.arena_size = l->memory_plan()->arena_size();
  }
  if (const fb::BuildInfo* b = l->build_info()) {
    m.build_info = {to_str(b->builder_version()), to_str(b->source_model_sha256()), to_str(b->precisions()),
                    to_str(b->flags())};
  }
  check_model(m);
  return m;
}

}  // namespace softdla
