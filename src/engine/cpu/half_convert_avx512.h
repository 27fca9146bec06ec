// The AVX-512 fp32 -> fp16 store of half_convert.h for 16 lanes, for kernels that convert in registers
// (the fused float epilogue): numerics.h's rule exactly (RNE, saturation to +-65504, every NaN as the
// quiet NaN 0x7e00).
#pragma once
#include <cstdint>

#include "x86_simd.h"

namespace softdla::cpu {

#ifdef SOFTDLA_X86
// The 16 lanes as fp16 bits by that rule: clamped to +-65504 (MINPS/MAXPS return their second operand,
// x, when it is NaN), converted with round to nearest even, and any NaN lane (rare: tested once) replaced
// by the one quiet NaN 0x7e00 (the conversion kept the sign and the payload's top bits).
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline __m256i to_halves_avx512(__m512 x) {
  x = _mm512_max_ps(_mm512_set1_ps(-65504.f), _mm512_min_ps(_mm512_set1_ps(65504.f), x));
  const __m256i h = _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT);
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  if (__builtin_expect(nan == 0, 1)) return h;
  return _mm256_mask_mov_epi16(h, nan, _mm256_set1_epi16(0x7e00));
}

// Whole vectors are stored plainly: a masked 16-bit store is twice as slow on AMD Zen 5.
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline void store_halves_avx512(__m512 x, uint16_t* out,
                                                                                                   __mmask16 m) {
  if (m == 0xFFFF) _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), to_halves_avx512(x));
  else _mm256_mask_storeu_epi16(out, m, to_halves_avx512(x));
}

// Every second half of src from src[0]: `values` (1 to 16) of them, zeros past, as 16 halves. They are
// the low halves of 16 dwords, read under a mask that stops at the last value, src[2 (values - 1)].
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline __m256i even_halves_avx512(const uint16_t* src,
                                                                                                      size_t values) {
  const __mmask32 load = __mmask32((uint64_t(1) << (2 * values - 1)) - 1);
  const __mmask16 keep = __mmask16((1u << values) - 1);
  // The zero-masking form: GCC 12 reports the plain form's undefined merge source as uninitialized.
  return _mm512_maskz_cvtepi32_epi16(keep, _mm512_maskz_loadu_epi16(load, src));
}
#endif

}  // namespace softdla::cpu
