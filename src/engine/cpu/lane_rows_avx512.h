// The store of the output-channel lane tiles (conv_lanes_f32.h, gemm_lanes_s8.h): a tile's vectors hold
// sixteen channels of one column (pixel); the block's buffer wants each channel's row of columns.
#pragma once
#include <cstddef>
#include <cstdint>

#include "x86_simd.h"

namespace softdla::cpu {

#ifdef SOFTDLA_X86
// Eight columns of 16 channels (a[p]: the channel lanes of column p) stored as the 16 channels' rows of 8
// columns, rows ld elements apart: two 4 x 4 transposes within each 128-bit lane, then each lane's four
// columns stored by one extracting store. A scatter per vector took about sixteen stores' time.
__attribute__((target("avx512f"), always_inline)) inline void store_channel_rows(const __m512 (&a)[8], float* dst,
                                                                                size_t ld) {
  __m512 rows[2][4];  // [pixels 0-3 | 4-7][channel j of each lane's four]: lane i holds channel 4 i + j
#pragma GCC unroll 2
  for (size_t h = 0; h < 2; ++h) {
    const __m512 t0 = _mm512_unpacklo_ps(a[4 * h], a[4 * h + 1]), t1 = _mm512_unpackhi_ps(a[4 * h], a[4 * h + 1]);
    const __m512 t2 = _mm512_unpacklo_ps(a[4 * h + 2], a[4 * h + 3]);
    const __m512 t3 = _mm512_unpackhi_ps(a[4 * h + 2], a[4 * h + 3]);
    rows[h][0] = _mm512_shuffle_ps(t0, t2, 0x44);
    rows[h][1] = _mm512_shuffle_ps(t0, t2, 0xEE);
    rows[h][2] = _mm512_shuffle_ps(t1, t3, 0x44);
    rows[h][3] = _mm512_shuffle_ps(t1, t3, 0xEE);
  }
#pragma GCC unroll 4
  for (size_t j = 0; j < 4; ++j) {
    float* row = dst + j * ld;
    _mm_storeu_ps(row, _mm512_extractf32x4_ps(rows[0][j], 0));
    _mm_storeu_ps(row + 4, _mm512_extractf32x4_ps(rows[1][j], 0));
    _mm_storeu_ps(row + 4 * ld, _mm512_extractf32x4_ps(rows[0][j], 1));
    _mm_storeu_ps(row + 4 * ld + 4, _mm512_extractf32x4_ps(rows[1][j], 1));
    _mm_storeu_ps(row + 8 * ld, _mm512_extractf32x4_ps(rows[0][j], 2));
    _mm_storeu_ps(row + 8 * ld + 4, _mm512_extractf32x4_ps(rows[1][j], 2));
    _mm_storeu_ps(row + 12 * ld, _mm512_extractf32x4_ps(rows[0][j], 3));
    _mm_storeu_ps(row + 12 * ld + 4, _mm512_extractf32x4_ps(rows[1][j], 3));
  }
}

// The same for int32 sums (the bits moved as they are).
__attribute__((target("avx512f"), always_inline)) inline void store_channel_rows(const __m512i (&a)[8], int32_t* dst,
                                                                                size_t ld) {
  const __m512 f[8] = {_mm512_castsi512_ps(a[0]), _mm512_castsi512_ps(a[1]), _mm512_castsi512_ps(a[2]),
                       _mm512_castsi512_ps(a[3]), _mm512_castsi512_ps(a[4]), _mm512_castsi512_ps(a[5]),
                       _mm512_castsi512_ps(a[6]), _mm512_castsi512_ps(a[7])};
  store_channel_rows(f, reinterpret_cast<float*>(dst), ld);
}
#endif

}  // namespace softdla::cpu
