// A 16 x 16 transpose of fp32 lanes in AVX-512 registers: the kernels that compute sixteen channels of
// one pixel per vector (depthwise_f16_blocks.h, the global average pool) turn planes into such vectors
// and back with it.
#pragma once
#include "x86_simd.h"

namespace softdla::cpu {

#ifdef SOFTDLA_X86
// r[i] lane j -> r[j] lane i.
__attribute__((target("avx512f"), always_inline)) inline void transpose16(__m512 (&r)[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
    r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
    r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
    r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
  }
  // r[4q + m] now holds, in each 128-bit lane L, element 4L + m of rows 4q .. 4q + 3.
  for (int q = 0; q < 2; ++q)
    for (int m = 0; m < 4; ++m) {
      t[8 * q + m] = _mm512_shuffle_f32x4(r[8 * q + m], r[8 * q + 4 + m], 0x88);
      t[8 * q + 4 + m] = _mm512_shuffle_f32x4(r[8 * q + m], r[8 * q + 4 + m], 0xdd);
    }
  for (int m = 0; m < 8; ++m) {
    r[m] = _mm512_shuffle_f32x4(t[m], t[8 + m], 0x88);
    r[8 + m] = _mm512_shuffle_f32x4(t[m], t[8 + m], 0xdd);
  }
}

#endif

}  // namespace softdla::cpu
