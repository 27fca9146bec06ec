// The AVX-512 fp32 -> fp16 store of half_convert.h for 16 lanes, for kernels that convert in registers
// (the fused float epilogue): numerics.h's rule exactly (RNE, saturation to +-65504, NaN as the
// canonical quiet NaN with its sign).
#pragma once
#include <cstdint>

#include "x86_simd.h"

namespace softdla::cpu {

#ifdef SOFTDLA_X86
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline void store_halves_avx512(__m512 x, uint16_t* out,
                                                                                                   __mmask16 m) {
  const __m512 max = _mm512_set1_ps(65504.f), min = _mm512_set1_ps(-65504.f);
  const __m512i sign = _mm512_set1_epi32(int32_t(0x80000000u)), qnan = _mm512_set1_epi32(0x7fc00000);
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  x = _mm512_max_ps(min, _mm512_min_ps(max, x));  // NaN survives: min/max return their second operand
  const __m512i canonical = _mm512_or_si512(qnan, _mm512_and_si512(_mm512_castps_si512(x), sign));
  x = _mm512_mask_mov_ps(x, nan, _mm512_castsi512_ps(canonical));
  _mm256_mask_storeu_epi16(out, m, _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
}
#endif

}  // namespace softdla::cpu
