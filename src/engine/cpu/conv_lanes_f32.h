// The FP32/FP16 1x1 convolution tile with output channels on the vector lanes, for grids whose pixel
// count leaves the pixel-vector tiles (conv_implicit_f32.cpp) computing many pixels past the end: a 7 x 7
// grid is 49 pixels, which 16-pixel vectors compute as 64, but 49 output channels' worth of lanes cost
// nothing extra when the layer has a multiple of 16 output channels.
//
// A tile is kP grid pixels x 16 kV output channels (kP kV accumulators): each input channel step loads kV
// weight vectors (16 channels each) and broadcasts kP input values from that channel's plane. k x k
// convolutions over small grids take the same tile with each pixel gathered from its own grid position
// (GatherInput), over steps (c, r, s). Each
// output's sum is the FMA chain over the input channels in ascending order from zero, as on every other
// path, so the bits are the same; the sums leave through the block's [channel][pixel] rows (scattered
// sixteen channels at a time) and the block's usual epilogue.
#pragma once
#include <cstddef>

#include "lane_rows_avx512.h"
#include "lane_tile_table.h"
#include "panel_stream.h"
#include "x86_simd.h"

namespace softdla::cpu::lanes_f32 {

constexpr size_t kBlockChannels = 48;  // output channels a block (three vectors)
constexpr size_t kTilePixels = 8;      // grid pixels a tile
constexpr size_t kAhead = 8;           // input channels a tile prefetches its plane ahead
constexpr size_t kWeightsAhead = 16;   // steps a tile prefetches its weight panel ahead

// Whether a 1x1 convolution of K output channels over a grid of `grid` pixels computes fewer products
// on this tile than on pixel-vector tiles (which compute `vector_pixels` pixels of the grid and K rounded
// up to 4 rows), with 3 % to spare for the scattered stores.
inline bool pays(size_t K, size_t grid, size_t vector_pixels) {
  const size_t lanes = (K + 15) / 16 * 16, rows = (K + 3) / 4 * 4;
  return grid * lanes * 103 < vector_pixels * rows * 100;
}

#ifdef SOFTDLA_X86
// Where a tile's kP pixels read their input, step by step. PlaneInput: a 1x1 convolution's planes (step
// ch is input channel ch: plane ch at the tile's first pixel, pixel p at x[p]).
struct PlaneInput {
  const float* x;
  size_t plane_px;
  __attribute__((always_inline)) void prefetch() const {
    _mm_prefetch(reinterpret_cast<const char*>(x + kAhead * plane_px), _MM_HINT_T0);
  }
  __attribute__((always_inline)) float value(size_t p) const { return x[p]; }
  __attribute__((always_inline)) void next() { x += plane_px; }
};

// GatherInput: a k x k convolution's widened planes, each pixel from its own grid position (cols[p], a
// pointer into the planes), step j = (c, r, s) at cols[p][k_off[j]]: the tile's pixels are any output
// pixels, so no grid column past a row's end is computed. k_off holds kGatherAhead steps of slack past
// the last, for the prefetch.
constexpr size_t kGatherAhead = 18;  // steps a gathered tile fetches its pixels' lines ahead (two 3x3 channels)
struct GatherInput {
  const float* cols[kTilePixels];
  const size_t* k_off;
  size_t last;  // the tile's last pixel (its lines, with the first's, are those a step reads)
  __attribute__((always_inline)) void prefetch() const {
    _mm_prefetch(reinterpret_cast<const char*>(cols[0] + k_off[kGatherAhead]), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(cols[last] + k_off[kGatherAhead]), _MM_HINT_T0);
  }
  __attribute__((always_inline)) float value(size_t p) const { return cols[p][*k_off]; }
  __attribute__((always_inline)) void next() { ++k_off; }
};

// c[p][v] = the FMA chain over the reduction steps of pixel p, output channels 16 v .. 16 v + 15.
// panel: the block's weights, [steps][48] (zero past K).
template <size_t kP, size_t kV, class Input>
__attribute__((target("avx512f,fma"), always_inline)) inline void accumulate(const float* panel, Input in, size_t steps,
                                                                           __m512 (&c)[kP][kV]) {
#pragma GCC unroll 8
  for (size_t p = 0; p < kP; ++p)
#pragma GCC unroll 3
    for (size_t v = 0; v < kV; ++v) c[p][v] = _mm512_setzero_ps();
  size_t stream_lines;  // the next unit's panel, a line a step into L2 (panel_stream.h)
  const char* stream = panel_stream().take(steps, stream_lines);
  for (size_t j = 0; j < steps; ++j, in.next(), panel += kBlockChannels) {
    in.prefetch();
    if (j < stream_lines) _mm_prefetch(stream + kStreamLineBytes * j, _MM_HINT_T1);
    // The panel is a new line per weight vector each step, from L2 or memory: asked for kWeightsAhead
    // steps early (the hardware's prefetchers left the FMAs waiting on them: ResNet-50 FP16 at batch 1
    // on the AVX-512 FMA path 0.92-0.94x the time; 8 steps 0.96, 24 0.95).
#pragma GCC unroll 3
    for (size_t v = 0; v < kV; ++v)
      _mm_prefetch(reinterpret_cast<const char*>(panel + kWeightsAhead * kBlockChannels + 16 * v), _MM_HINT_T0);
    __m512 w[kV];
#pragma GCC unroll 3
    for (size_t v = 0; v < kV; ++v) w[v] = _mm512_loadu_ps(panel + 16 * v);
#pragma GCC unroll 8
    for (size_t p = 0; p < kP; ++p) {
      const __m512 xp = _mm512_set1_ps(in.value(p));
#pragma GCC unroll 3
      for (size_t v = 0; v < kV; ++v) c[p][v] = _mm512_fmadd_ps(xp, w[v], c[p][v]);
    }
  }
}

// The gathered input of the tile whose pixel p is at planes + pixel_off[p] (kP pixels; the unused
// pointers repeat the first).
template <size_t kP>
__attribute__((always_inline)) inline GatherInput gather_input(const float* planes, const size_t* pixel_off,
                                                               const size_t* k_off) {
  GatherInput in{{}, k_off, kP - 1};
  for (size_t p = 0; p < kTilePixels; ++p) in.cols[p] = planes + pixel_off[p < kP ? p : 0];
  return in;
}

// The tile's sums into the block's rows: sums is row 0 at the tile's first pixel, rows ld floats apart.
template <size_t kP, size_t kV, class Input>
__attribute__((target("avx512f,fma"), always_inline)) inline void tile_from(const float* panel, const Input& in,
                                                                          size_t steps, float* sums, size_t ld) {
  __m512 c[kP][kV];
  accumulate(panel, in, steps, c);
  if constexpr (kP == 8) {
#pragma GCC unroll 3
    for (size_t v = 0; v < kV; ++v) {
      const __m512 a[8] = {c[0][v], c[1][v], c[2][v], c[3][v], c[4][v], c[5][v], c[6][v], c[7][v]};
      store_channel_rows(a, sums + 16 * v * ld, ld);
    }
    return;
  }
  const __m512i rows = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                          _mm512_set1_epi32(int(ld)));
#pragma GCC unroll 8
  for (size_t p = 0; p < kP; ++p)
#pragma GCC unroll 3
    for (size_t v = 0; v < kV; ++v) _mm512_i32scatter_ps(sums + 16 * v * ld + p, rows, c[p][v], 4);
}

// A 1x1 convolution's tile: x is plane 0 at the tile's first pixel, planes plane_px floats apart.
template <size_t kP, size_t kV>
__attribute__((target("avx512f,fma"), noinline)) void tile(const float* panel, const float* x, size_t plane_px,
                                                         size_t channels, float* sums, size_t ld) {
  tile_from<kP, kV>(panel, PlaneInput{x, plane_px}, channels, sums, ld);
}

// A k x k convolution's tile of gathered pixels (GatherInput): pixel p at planes + pixel_off[p].
template <size_t kP, size_t kV>
__attribute__((target("avx512f,fma"), noinline)) void tile_gather(const float* panel, const float* planes,
                                                                const size_t* pixel_off, const size_t* k_off,
                                                                size_t steps, float* sums, size_t ld) {
  tile_from<kP, kV>(panel, gather_input<kP>(planes, pixel_off, k_off), steps, sums, ld);
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

}  // namespace softdla::cpu::lanes_f32
