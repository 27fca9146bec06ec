// The INT8 GEMM tile with output channels on the vector lanes (AVX-512 VNNI): for the 1x1 convolutions
// over a 7 x 7 grid, whose 49 columns the 16-column panels of gemm_vnni.h compute as 64, and for every
// k x k convolution of the implicit GEMM (conv_implicit.h), whose output pixels it computes without the
// grid's dropped columns. Here a tile is kP columns x 16 kV output channels: each k quad loads kV weight
// vectors (the quads of 16 channels) and broadcasts kP columns' activation quads, from the packed B
// panel (PanelSource) or from each column's own address (GatherSource), vpdpbusd multiplying the activations (offset by 128, unsigned) by the weights
// (signed) as the panel tiles do, and the sums start from the rows' -128 * sum(w), so each sum is the
// same exact int32. They leave through a [channel][column] buffer (scattered sixteen channels at a
// time) and gemm_vnni.cpp's usual tile epilogue.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "lane_rows_avx512.h"
#include "lane_tile_table.h"
#include "panel_stream.h"
#include "x86_simd.h"

namespace softdla::cpu::lanes_s8 {

constexpr size_t kBlockRows = 48;   // output channels a block (three vectors of sixteen)
constexpr size_t kTileCols = 8;     // columns a tile (half a 16-column panel)
constexpr size_t kWeightsAhead = 16;  // quad steps a tile fetches its weights ahead (8 to 24 measured alike)

// The first row of each block of m output channels, and m last: as few blocks of at most kBlockRows as
// cover m, their vectors of sixteen shared out evenly (the larger blocks first). Threads share a layer
// out by blocks, so blocks that cost alike finish together: 64 channels as 48 + 16 left the thread with
// the 48 three times the other's work (ResNet's 3 x 3 layers of 64 channels scaled 1.3-1.4 times on two
// threads).
inline std::vector<size_t> even_blocks(size_t m) {
  const size_t vectors = (m + 15) / 16, blocks = (vectors + 2) / 3;
  std::vector<size_t> first{0};
  for (size_t j = 0; j < blocks; ++j)
    first.push_back(std::min(m, first.back() + 16 * (vectors / blocks + (j < vectors % blocks))));
  return first;
}

// Whether a GEMM of m rows over n columns, depth k, is faster on lane tiles: they compute m rounded up
// to 16 rows where the panels compute n rounded up to 16 columns, but each tile's transposed stores and
// its epilogue from memory cost a fixed share. Measured on Zen 4 with the transposed stores: a 7 x 7 grid
// gains at depth 160 and 320 (MobileNetV2's last stage, 15-20 %) and 512 (ResNet-50's, 15 %); a 14 x 14
// grid (6 % of its columns past the end) gains nothing at depth 256-1024. (With scattered stores, depths
// below 512 lost 5-15 %.)
inline bool pays(size_t m, size_t n, size_t k) {
  return k >= 160 && n * ((m + 15) / 16 * 16) * 110 < (n + 15) / 16 * 16 * m * 100;
}

#ifdef SOFTDLA_X86
// acc += x (unsigned bytes) . w (signed bytes), four products a lane. Written as asm with the
// accumulator tied: with the intrinsic, GCC 12 copied 24 accumulators through other registers and the
// stack on every step.
__attribute__((target("avx512f,avx512vnni"), always_inline)) inline void dpbusd(__m512i& acc, __m512i x, __m512i w) {
  asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(x), "v"(w));
}

// v[p] += s for each p.
__attribute__((target("avx512f"), always_inline)) inline void add_to_each(__m512i (&v)[8], __m512i s) {
#pragma GCC unroll 8
  for (size_t p = 0; p < 8; ++p) v[p] = _mm512_add_epi32(v[p], s);
}

// Where a tile's activation quads come from. Panel: the packed B panel at the tile's first column
// (quad q of column p at b[q * 16 + p]). Gather: column p's quads at cols[p] + k_off[q] (bytes), any
// address per column and per quad (the implicit convolution's packed planes, conv_implicit.cpp).
struct PanelSource {
  const int32_t* b;
  __attribute__((always_inline)) int32_t at(size_t q, size_t p) const { return b[q * 16 + p]; }
};
struct GatherSource {
  const uint8_t* cols[8];
  const size_t* k_off;
  __attribute__((always_inline)) int32_t at(size_t q, size_t p) const {
    int32_t v;
    std::memcpy(&v, cols[p] + k_off[q], 4);
    return v;
  }
};

// Accumulators as named variables (c<column>_<vector>; those past kP or kV unused and dropped).
#define SOFTDLA_LANE_COLS8(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
template <size_t kP, size_t kV, class Source>
__attribute__((target("avx512f,avx512bw,avx512vnni"), always_inline)) inline void tile_from(
    const int32_t* w, const Source& src, size_t kq, const int32_t* init, int32_t* buf, size_t ld) {
#define DECLARE(p) __m512i c##p##_0 = _mm512_setzero_si512(), c##p##_1 = c##p##_0, c##p##_2 = c##p##_0;
  SOFTDLA_LANE_COLS8(DECLARE)
#undef DECLARE
  size_t stream_lines;  // the next unit's weights, a line a quad step into L2 (panel_stream.h)
  const char* stream = panel_stream().take(kq, stream_lines);
  for (size_t q = 0; q < kq; ++q, w += kBlockRows) {
    if (q < stream_lines) _mm_prefetch(stream + kStreamLineBytes * q, _MM_HINT_T1);
    // The block's weights are a new line per vector each step, from L2 or memory: asked for kWeightsAhead
    // steps early (the hardware's prefetchers left the loop waiting on them: ResNet-50 INT8 at batch 1 on
    // the AVX-512 VNNI path 0.96-0.97x the time).
    const int32_t* ahead = w + kWeightsAhead * kBlockRows;
    _mm_prefetch(reinterpret_cast<const char*>(ahead), _MM_HINT_T0);
    if constexpr (kV > 1) _mm_prefetch(reinterpret_cast<const char*>(ahead + 16), _MM_HINT_T0);
    if constexpr (kV > 2) _mm_prefetch(reinterpret_cast<const char*>(ahead + 32), _MM_HINT_T0);
    const __m512i w0 = _mm512_loadu_si512(w);
    const __m512i w1 = kV > 1 ? _mm512_loadu_si512(w + 16) : w0;
    const __m512i w2 = kV > 2 ? _mm512_loadu_si512(w + 32) : w0;
#define STEP(p)                                                             \
  if constexpr (p < kP) {                                                   \
    const __m512i x = _mm512_set1_epi32(src.at(q, p));                      \
    dpbusd(c##p##_0, x, w0);                                                \
    if constexpr (kV > 1) dpbusd(c##p##_1, x, w1);                          \
    if constexpr (kV > 2) dpbusd(c##p##_2, x, w2);                          \
  }
    SOFTDLA_LANE_COLS8(STEP)
#undef STEP
  }
  // The starting sums added last (vpdpbusd wraps, never saturates: the same int32 in any order).
  const __m512i s0 = _mm512_loadu_si512(init), s1 = _mm512_loadu_si512(init + 16), s2 = _mm512_loadu_si512(init + 32);
  // Whole tiles through a register transpose, partial ones scattered.
  if constexpr (kP == 8) {
    __m512i v0[8] = {c0_0, c1_0, c2_0, c3_0, c4_0, c5_0, c6_0, c7_0};
    add_to_each(v0, s0);
    store_channel_rows(v0, buf, ld);
    if constexpr (kV > 1) {
      __m512i v1[8] = {c0_1, c1_1, c2_1, c3_1, c4_1, c5_1, c6_1, c7_1};
      add_to_each(v1, s1);
      store_channel_rows(v1, buf + 16 * ld, ld);
    }
    if constexpr (kV > 2) {
      __m512i v2[8] = {c0_2, c1_2, c2_2, c3_2, c4_2, c5_2, c6_2, c7_2};
      add_to_each(v2, s2);
      store_channel_rows(v2, buf + 32 * ld, ld);
    }
    return;
  }
  const __m512i rows = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                          _mm512_set1_epi32(int(ld)));
#define SCATTER(p)                                                                                        \
  if constexpr (p < kP) {                                                                                 \
    _mm512_i32scatter_epi32(buf + p, rows, _mm512_add_epi32(c##p##_0, s0), 4);                            \
    if constexpr (kV > 1) _mm512_i32scatter_epi32(buf + 16 * ld + p, rows, _mm512_add_epi32(c##p##_1, s1), 4); \
    if constexpr (kV > 2) _mm512_i32scatter_epi32(buf + 32 * ld + p, rows, _mm512_add_epi32(c##p##_2, s2), 4); \
  }
  SOFTDLA_LANE_COLS8(SCATTER)
#undef SCATTER
}
#undef SOFTDLA_LANE_COLS8

// w: the block's weights, [kq][48] quads (zero past m); b: the panel's quads at the tile's first column;
// init: the block's 48 starting sums; buf: the block's row 0 at the tile's first column, rows ld words apart.
template <size_t kP, size_t kV>
__attribute__((target("avx512f,avx512bw,avx512vnni"), noinline)) void tile(const int32_t* w, const int32_t* b,
                                                                         size_t kq, const int32_t* init,
                                                                         int32_t* buf, size_t ld) {
  tile_from<kP, kV>(w, PanelSource{b}, kq, init, buf, ld);
}

// The same with each column's quads gathered: column p's quad q at cols[p] + k_off[q].
template <size_t kP, size_t kV>
__attribute__((target("avx512f,avx512bw,avx512vnni"), noinline)) void tile_gather(const int32_t* w,
                                                                                const uint8_t* const* cols,
                                                                                const size_t* k_off, size_t kq,
                                                                                const int32_t* init, int32_t* buf,
                                                                                size_t ld) {
  GatherSource src{{}, k_off};
  for (size_t p = 0; p < 8; ++p) src.cols[p] = cols[p < kP ? p : 0];
  tile_from<kP, kV>(w, src, kq, init, buf, ld);
}

// The tile instances, for lane_tile_for (lane_tile_table.h).
struct Tiles {
  template <size_t kP, size_t kV>
  static constexpr auto fn = &tile<kP, kV>;
};
struct GatherTiles {
  template <size_t kP, size_t kV>
  static constexpr auto fn = &tile_gather<kP, kV>;
};

#endif

}  // namespace softdla::cpu::lanes_s8
