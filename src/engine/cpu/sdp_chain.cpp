#include "sdp_chain.h"

#include <algorithm>
#include <cmath>

#include "element.h"
#include "half_convert.h"
#include "half_convert_avx512.h"
#include "half_convert_f16c.h"
#include "kernel.h"
#include "multiversion.h"
#include "numerics.h"
#include "half_steps_avx512.h"
#include "int8_tables.h"
#include "sdp_lanes_avx2.h"
#include "sdp_lanes_avx512.h"
#include "x86_simd.h"

namespace softdla::cpu {

using num::rescale32;
using num::sat32;

SdpChain::SdpChain(const Model& m, const Op& op, const SdpParams& p)
    : requant_(p.requant), dtype_(m.tensors[op.outputs[0]].dtype) {
  const Shape& out = m.tensors[op.outputs[0]].shape;
  hw_ = out[2] * out[3];
  for (const SdpStep& s : p.steps) {
    Step st{s, 0, {}};
    if (is_eltwise(s.kind)) {
      st.operand_slot = eltwise_operand_slot(op, s.tensor);
      st.operand_shape = m.tensors[uint32_t(s.tensor)].shape;
    }
    steps_.push_back(std::move(st));
  }
  if (p.lut != ActivationLut::kNone) {
    has_lut_ = true;
    lut_ = num::activation_lut(p.lut, p.lut_input_scale, m.tensors[op.outputs[0]].scale);
  }
}

const void* SdpChain::operand_row(const Step& st, Operands ops, uint32_t n, uint32_t c, size_t hw0,
                                  bool& broadcast_hw) const {
  const Shape& e = st.operand_shape;
  const size_t en = e[0] == 1 ? 0 : n, ec = e[1] == 1 ? 0 : c;
  broadcast_hw = e[2] * e[3] == 1;
  const size_t ehw = size_t(e[2]) * e[3];
  const size_t index = (en * e[1] + ec) * ehw + (broadcast_hw ? 0 : hw0);
  const size_t elem = element_size(dtype_);
  return static_cast<const uint8_t*>(ops[st.operand_slot]) + index * elem;
}

SOFTDLA_MULTIVERSION
void SdpChain::run_int8(int64_t* v, size_t count, uint32_t n, uint32_t c, size_t hw0, Operands ops,
                        int8_t* out) const {
  for (const Step& st : steps_) {
    const SdpStep& s = st.s;
    const int64_t operand = s.ivalues.empty() ? 0 : s.ivalues[s.ivalues.size() == 1 ? 0 : c];
    switch (s.kind) {
      case SdpKind::kBias:
        for (size_t i = 0; i < count; ++i) v[i] = std::clamp<int64_t>(v[i] + operand, INT32_MIN, INT32_MAX);
        break;
      case SdpKind::kScale:
        for (size_t i = 0; i < count; ++i) v[i] = rescale32(v[i], operand, s.shift);
        break;
      case SdpKind::kPRelu:
        for (size_t i = 0; i < count; ++i)
          if (v[i] < 0) v[i] = rescale32(v[i], operand, s.shift);
        break;
      case SdpKind::kRelu:
        for (size_t i = 0; i < count; ++i) v[i] = std::max<int64_t>(v[i], 0);
        break;
      case SdpKind::kClip:
        for (size_t i = 0; i < count; ++i) v[i] = std::clamp<int64_t>(v[i], s.lo_i, s.hi_i);
        break;
      default: {  // element-wise with the second tensor
        bool bc = false;
        const int8_t* e = static_cast<const int8_t*>(operand_row(st, ops, n, c, hw0, bc));
        for (size_t i = 0; i < count; ++i) {
          const int64_t x = rescale32(e[bc ? 0 : i], s.tensor_multiplier, s.tensor_shift);
          switch (s.kind) {
            case SdpKind::kEltAdd: v[i] = sat32(v[i] + x); break;
            case SdpKind::kEltSub: v[i] = sat32(v[i] - x); break;
            case SdpKind::kEltMul: v[i] = rescale32(v[i], x, s.shift); break;
            case SdpKind::kEltDiv: v[i] = num::divide32(v[i], x, s.shift); break;
            case SdpKind::kEltMax: v[i] = std::max(v[i], x); break;
            default: v[i] = std::min(v[i], x); break;
          }
        }
      }
    }
  }
  const size_t rc = requant_.multiplier.size() == 1 ? 0 : c;
  const int64_t mult = requant_.multiplier[rc];
  const unsigned shift = requant_.shift[rc];
  const int64_t* __restrict src = v;
  int8_t* __restrict dst = out;
  for (size_t i = 0; i < count; ++i) dst[i] = num::sat8(num::rshift_rhaz(src[i] * mult, shift));
  if (has_lut_)
    for (size_t i = 0; i < count; ++i) out[i] = lut_[size_t(out[i] + 128)];
}

namespace {

#ifdef SOFTDLA_X86
// The float steps with one operand per channel, which the AVX-512 epilogues run in registers
// (float_lanes, sdp_lanes_avx512.h).
bool is_channel_float_step(SdpKind kind) {
  return kind == SdpKind::kBias || kind == SdpKind::kScale || kind == SdpKind::kPRelu || kind == SdpKind::kRelu ||
         kind == SdpKind::kClip;
}

// Step s with channel c's operand.
ChannelStep channel_step(const SdpStep& s, uint32_t c) {
  return {s.kind, s.fvalues.empty() ? 0.f : s.fvalues[s.fvalues.size() == 1 ? 0 : c], s.lo, s.hi};
}

__attribute__((target("avx512f"))) bool float_step_avx512(SdpKind kind, float* v, size_t count, float operand, float lo,
                                                          float hi) {
  if (!is_channel_float_step(kind)) return false;
  const __m512 k = _mm512_set1_ps(operand), vlo = _mm512_set1_ps(lo), vhi = _mm512_set1_ps(hi);
  for (size_t i = 0; i < count; i += 16) {
    const __mmask16 m = count - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (count - i)) - 1);
    _mm512_mask_storeu_ps(v + i, m, float_lanes(kind, _mm512_maskz_loadu_ps(m, v + i), k, vlo, vhi));
  }
  return true;
}

// v through before[0..n_before), then the fp16 store into out; with `other` (run_residual_halves), the
// result rounded to fp16 first, added to other's values and taken through after[0..n_after). Four
// vectors at a time, the last group under masks.
__attribute__((target("avx512f,avx512bw,avx512vl,f16c"))) void steps_to_halves_avx512(
    const ChannelStep* before, size_t n_before, const float* v, size_t count, uint16_t* out,
    const uint16_t* other = nullptr, const ChannelStep* after = nullptr, size_t n_after = 0) {
  constexpr size_t V = 4;
  auto mask = [&](size_t i) { return count - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (count - i)) - 1); };
  for (size_t i = 0; i < count; i += 16 * V) {
    const size_t vecs = std::min(V, (count - i + 15) / 16);
    __m512 x[V];
    __mmask16 masks[V];
    for (size_t u = 0; u < V; ++u) {
      masks[u] = u < vecs ? mask(i + 16 * u) : __mmask16(0);
      x[u] = _mm512_maskz_loadu_ps(masks[u], v + i + 16 * u);
    }
    steps_to_halves_lanes(x, vecs, masks, before, n_before, out + i, other ? other + i : nullptr, after, n_after);
  }
}

// The same on AVX2 with F16C (no residual): four vectors of eight at a time, the last partial vector
// through a padded copy; the steps and the fp16 rule as run_float then floats_to_halves, so the same bits.
__attribute__((target("avx2,fma,f16c"))) void steps_to_halves_avx2(const ChannelStep* steps, size_t n_steps,
                                                                   const float* v, size_t count, uint16_t* out) {
  constexpr size_t V = 4;
  auto apply = [&](__m256(&x)[V]) __attribute__((target("avx2,fma,f16c"), always_inline)) {
    for (size_t j = 0; j < n_steps; ++j) {
      const ChannelStep& s = steps[j];
      step_lanes(s.kind, _mm256_set1_ps(s.operand), _mm256_set1_ps(s.lo), _mm256_set1_ps(s.hi), x);
    }
  };
  size_t i = 0;
  for (; i + 8 * V <= count; i += 8 * V) {
    __m256 x[V];
    for (size_t u = 0; u < V; ++u) x[u] = _mm256_loadu_ps(v + i + 8 * u);
    apply(x);
    for (size_t u = 0; u < V; ++u)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i + 8 * u), to_halves_f16c(x[u]));
  }
  if (i == count) return;
  alignas(32) float rest[8 * V] = {};
  std::copy(v + i, v + count, rest);
  __m256 x[V];
  for (size_t u = 0; u < V; ++u) x[u] = _mm256_load_ps(rest + 8 * u);
  apply(x);
  for (size_t u = 0; u < V && i + 8 * u < count; ++u)
    store_first_halves(to_halves_f16c(x[u]), std::min<size_t>(8, count - i - 8 * u), out + i + 8 * u);
}
#endif

}  // namespace

#ifdef SOFTDLA_X86
namespace {
// channel_steps_to_halves's rows, the row loop compiled with the steps (flatten: inlined, no call per row).
__attribute__((target("avx512f,avx512bw,avx512vl,f16c"), flatten)) void rows_to_halves_avx512(const HalfRows& h) {
  for (size_t r = 0; r < h.rows; ++r)
    steps_to_halves_avx512(h.before + r * h.n_before, h.n_before, h.v + r * h.v_stride, h.count, h.out + r * h.out_stride,
                           h.other ? h.other + r * h.other_stride : nullptr, h.after + r * h.n_after, h.n_after);
}
}  // namespace
#endif

void channel_steps_to_halves(const HalfRows& h) {
#ifdef SOFTDLA_X86
  rows_to_halves_avx512(h);
#else
  (void)h;
#endif
}

SOFTDLA_MULTIVERSION
void SdpChain::run_float(float* v, size_t count, uint32_t n, uint32_t c, size_t hw0, Operands ops) const {
#ifdef SOFTDLA_X86
  const bool avx512 = has_avx512(active_isa());
#endif
  for (const Step& st : steps_) {
    const SdpStep& s = st.s;
    const float operand = s.fvalues.empty() ? 0.f : s.fvalues[s.fvalues.size() == 1 ? 0 : c];
#ifdef SOFTDLA_X86
    if (avx512 && float_step_avx512(s.kind, v, count, operand, s.lo, s.hi)) continue;
#endif
    switch (s.kind) {
      case SdpKind::kBias:
        for (size_t i = 0; i < count; ++i) v[i] += operand;
        break;
      case SdpKind::kScale:
        for (size_t i = 0; i < count; ++i) v[i] *= operand;
        break;
      case SdpKind::kPRelu:
        for (size_t i = 0; i < count; ++i)
          if (v[i] < 0) v[i] *= operand;
        break;
      case SdpKind::kRelu:
        for (size_t i = 0; i < count; ++i) v[i] = v[i] > 0.f ? v[i] : (std::isnan(v[i]) ? v[i] : 0.f);
        break;
      case SdpKind::kClip:
        for (size_t i = 0; i < count; ++i)
          if (!std::isnan(v[i])) v[i] = std::clamp(v[i], s.lo, s.hi);
        break;
      case SdpKind::kSigmoid:
        for (size_t i = 0; i < count; ++i) v[i] = 1.f / (1.f + std::exp(-v[i]));
        break;
      case SdpKind::kTanh:
        for (size_t i = 0; i < count; ++i) v[i] = std::tanh(v[i]);
        break;
      default: {
        bool bc = false;
        const void* row = operand_row(st, ops, n, c, hw0, bc);
        thread_local std::vector<float> ebuf;
        if (dtype_ == DataType::kFloat16 && !bc) {
          ebuf.resize(count);
          halves_to_floats(static_cast<const uint16_t*>(row), ebuf.data(), count);
          if (s.kind == SdpKind::kEltAdd) {
            for (size_t i = 0; i < count; ++i) v[i] += ebuf[i];
            break;
          }
        }
        for (size_t i = 0; i < count; ++i) {
          const size_t j = bc ? 0 : i;
          const float x = dtype_ == DataType::kFloat16 ? (bc ? load(static_cast<const uint16_t*>(row), 0) : ebuf[i])
                                                       : load(static_cast<const float*>(row), j);
          switch (s.kind) {
            case SdpKind::kEltAdd: v[i] += x; break;
            case SdpKind::kEltSub: v[i] -= x; break;
            case SdpKind::kEltMul: v[i] *= x; break;
            case SdpKind::kEltDiv: v[i] /= x; break;
            case SdpKind::kEltMax: v[i] = std::isnan(x) ? x : std::max(v[i], x); break;
            default: v[i] = std::isnan(x) ? x : std::min(v[i], x); break;
          }
        }
      }
    }
  }
}

bool SdpChain::run_float_to_halves(const float* v, size_t count, uint32_t c, uint16_t* out) const {
#ifdef SOFTDLA_X86
  const Isa isa = active_isa();
  const bool avx2 = !has_avx512(isa) && isa >= Isa::kAvx2 && cpu_has_f16c();
  if ((!has_avx512(isa) && !avx2) || steps_.size() > kMaxChannelSteps) return false;
  ChannelStep fused[kMaxChannelSteps];
  for (size_t j = 0; j < steps_.size(); ++j) {
    if (!is_channel_float_step(steps_[j].s.kind)) return false;
    fused[j] = channel_step(steps_[j].s, c);
  }
  if (avx2) steps_to_halves_avx2(fused, steps_.size(), v, count, out);
  else steps_to_halves_avx512(fused, steps_.size(), v, count, out);
  return true;
#else
  (void)v, (void)count, (void)c, (void)out;
  return false;
#endif
}

bool SdpChain::channel_steps_only() const { return channel_steps_from(0); }

bool SdpChain::channel_steps_from(size_t first) const {
#ifdef SOFTDLA_X86
  if (steps_.size() < first || steps_.size() - first > kMaxChannelSteps) return false;
  for (size_t j = first; j < steps_.size(); ++j)
    if (!is_channel_float_step(steps_[j].s.kind)) return false;
  return true;
#else
  (void)first;
  return false;
#endif
}

bool SdpChain::channel_steps(uint32_t channels, std::vector<ChannelStep>& out, bool skip_first) const {
  out.clear();
  const size_t first = skip_first ? 1 : 0;
  if (!channel_steps_from(first)) return false;
#ifdef SOFTDLA_X86
  out.reserve(size_t(channels) * (steps_.size() - first));
  for (uint32_t c = 0; c < channels; ++c)
    for (size_t j = first; j < steps_.size(); ++j) out.push_back(channel_step(steps_[j].s, c));
#else
  (void)channels;
#endif
  return true;
}

bool SdpChain::residual_halves_form(const SdpChain& before) const {
#ifdef SOFTDLA_X86
  if (dtype_ != DataType::kFloat16 || !has_avx512(active_isa()) || steps_.empty() || steps_.size() > kMaxChannelSteps ||
      !before.channel_steps_only())
    return false;
  const Step& add = steps_[0];
  return add.s.kind == SdpKind::kEltAdd && add.operand_shape[2] * add.operand_shape[3] == hw_ && channel_steps_from(1);
#else
  (void)before;
  return false;
#endif
}

void SdpChain::run_residual_halves(const SdpChain& before, const float* mine, const uint16_t* other, size_t count,
                                   uint32_t c, uint16_t* out) const {
#ifdef SOFTDLA_X86
  ChannelStep pre[kMaxChannelSteps], post[kMaxChannelSteps];
  for (size_t j = 0; j < before.steps_.size(); ++j) pre[j] = channel_step(before.steps_[j].s, c);
  for (size_t j = 1; j < steps_.size(); ++j) post[j - 1] = channel_step(steps_[j].s, c);
  steps_to_halves_avx512(pre, before.steps_.size(), mine, count, out, other, post, steps_.size() - 1);
#else
  (void)before, (void)mine, (void)other, (void)count, (void)c, (void)out;
#endif
}

}  // namespace softdla::cpu
