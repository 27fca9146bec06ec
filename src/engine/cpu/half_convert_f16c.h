// The F16C fp32 -> fp16 conversion of half_convert.h for 8 lanes, for kernels that convert in registers:
// numerics.h's rule exactly (RNE, saturation to +-65504, every NaN as the quiet NaN 0x7e00).
#pragma once
#include <cstddef>
#include <cstdint>

#include "x86_simd.h"

namespace softdla::cpu {

#ifdef SOFTDLA_X86
// min/max return their second operand when it is NaN, so NaN survives the clamp; then it becomes the
// quiet NaN 0x7e00 (sign and payload dropped), as the scalar rule does. The select is and/andnot/or:
// GCC 12 turns _mm256_blendv_ps under target("avx") into a branch per lane.
__attribute__((target("avx,f16c"), always_inline)) inline __m128i to_halves_f16c(__m256 x) {
  const __m256 max = _mm256_set1_ps(65504.f), min = _mm256_set1_ps(-65504.f);
  const __m256 qnan = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fc00000));
  const __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
  x = _mm256_max_ps(min, _mm256_min_ps(max, x));
  x = _mm256_or_ps(_mm256_and_ps(nan, qnan), _mm256_andnot_ps(nan, x));
  return _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT);
}

// The first n (1 to 8) of eight halves to out, in whole pieces of 8, or of 4, 2 and 1 (no byte past
// the n-th is written: the next ones may be another thread's).
__attribute__((target("avx2"), always_inline)) inline void store_first_halves(__m128i h, size_t n, uint16_t* out) {
  if (n == 8) return _mm_storeu_si128(reinterpret_cast<__m128i*>(out), h);
  if (n & 4) _mm_storel_epi64(reinterpret_cast<__m128i*>(out), h), h = _mm_srli_si128(h, 8), out += 4;
  if (n & 2) _mm_storeu_si32(out, h), h = _mm_srli_si128(h, 4), out += 2;
  if (n & 1) *out = uint16_t(_mm_cvtsi128_si32(h));
}
#endif

}  // namespace softdla::cpu
