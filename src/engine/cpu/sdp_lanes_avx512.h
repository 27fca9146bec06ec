// One per-channel float step of the SDP chain (bias, scale, PReLU, ReLU, clip) on 16 lanes of AVX-512:
// the semantics every fused FP16/FP32 epilogue shares, so that each lane is exactly what the scalar
// loops of SdpChain::run_float give (the same IEEE operation, ordered compares, NaN kept, and the sign of
// zero: ReLU maps -0 to +0 and Clip keeps a value equal to a bound as it is). The operands are vectors:
// one channel's value broadcast (a row of one channel), or sixteen channels' values (a pixel of sixteen
// channels, depthwise_f16_blocks.h).
#pragma once
#include <cstddef>

#include "model.h"
#include "x86_simd.h"

namespace softdla::cpu {

#ifdef SOFTDLA_X86
// MAXPS/MINPS return their second operand when either is NaN or both are zeros (of either sign), which
// is what makes the two-instruction forms below exact: max(lo, x) then min(hi, .) is std::clamp with NaN
// and a zero equal to a zero bound kept as they are; ReLU's max(+0, x) keeps NaN and -0, and adding +0
// turns -0 into +0 and changes nothing else (NaN keeps its payload).
__attribute__((target("avx512f"), always_inline)) inline __m512 float_lanes(SdpKind kind, __m512 x, __m512 k, __m512 vlo,
                                                                          __m512 vhi) {
  const __m512 zero = _mm512_setzero_ps();
  switch (kind) {
    case SdpKind::kBias: return _mm512_add_ps(x, k);
    case SdpKind::kScale: return _mm512_mul_ps(x, k);
    case SdpKind::kPRelu: return _mm512_mask_mul_ps(x, _mm512_cmp_ps_mask(x, zero, _CMP_LT_OQ), x, k);
    case SdpKind::kRelu: return _mm512_add_ps(_mm512_max_ps(zero, x), zero);  // x > 0 ? x : +0, NaN stays
    default: return _mm512_min_ps(vhi, _mm512_max_ps(vlo, x));                 // x < lo ? lo : (hi < x ? hi : x)
  }
}

// One step of kind `kind` (operands k, lo, hi) on x[0 .. V): the kind dispatched once for all V.
template <size_t V>
__attribute__((target("avx512f"), always_inline)) inline void step_lanes(SdpKind kind, __m512 k, __m512 lo, __m512 hi,
                                                                       __m512 (&x)[V]) {
  switch (kind) {
#define SOFTDLA_STEP_CASE(kind)                                                   \
  case kind:                                                                      \
    for (size_t v = 0; v < V; ++v) x[v] = float_lanes(kind, x[v], k, lo, hi);   \
    break;
    SOFTDLA_STEP_CASE(SdpKind::kBias)
    SOFTDLA_STEP_CASE(SdpKind::kScale)
    SOFTDLA_STEP_CASE(SdpKind::kPRelu)
    SOFTDLA_STEP_CASE(SdpKind::kRelu)
    default:
      for (size_t v = 0; v < V; ++v) x[v] = float_lanes(SdpKind::kClip, x[v], k, lo, hi);
#undef SOFTDLA_STEP_CASE
  }
}
#endif

}  // namespace softdla::cpu
