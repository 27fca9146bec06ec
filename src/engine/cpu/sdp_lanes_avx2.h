// The per-channel float steps of sdp_lanes_avx512.h on eight AVX2 lanes: the same IEEE operations in the
// same order, so a lane is the same bits on either path (and as SdpChain::run_float's scalar loops).
#pragma once
#include <cstddef>

#include "model.h"
#include "x86_simd.h"

namespace softdla::cpu {

#ifdef SOFTDLA_X86
// See float_lanes (AVX-512) for why max/min in this operand order keep NaN and the sign of zero. PReLU
// selects with and/andnot/or: x < 0 is false for NaN and -0, which stay as they are.
__attribute__((target("avx2"), always_inline)) inline __m256 float_lanes(SdpKind kind, __m256 x, __m256 k, __m256 vlo,
                                                                       __m256 vhi) {
  const __m256 zero = _mm256_setzero_ps();
  switch (kind) {
    case SdpKind::kBias: return _mm256_add_ps(x, k);
    case SdpKind::kScale: return _mm256_mul_ps(x, k);
    case SdpKind::kPRelu: {
      const __m256 negative = _mm256_cmp_ps(x, zero, _CMP_LT_OQ);
      return _mm256_or_ps(_mm256_and_ps(negative, _mm256_mul_ps(x, k)), _mm256_andnot_ps(negative, x));
    }
    case SdpKind::kRelu: return _mm256_add_ps(_mm256_max_ps(zero, x), zero);
    default: return _mm256_min_ps(vhi, _mm256_max_ps(vlo, x));
  }
}

// One step of kind `kind` on x[0 .. V): the kind dispatched once for all V.
template <size_t V>
__attribute__((target("avx2"), always_inline)) inline void step_lanes(SdpKind kind, __m256 k, __m256 lo, __m256 hi,
                                                                    __m256 (&x)[V]) {
  switch (kind) {
#define SOFTDLA_STEP_CASE(kind)                                                 \
  case kind:                                                                    \
    for (size_t v = 0; v < V; ++v) x[v] = float_lanes(kind, x[v], k, lo, hi); \
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
