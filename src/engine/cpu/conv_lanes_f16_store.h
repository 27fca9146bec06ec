// The FP16 epilogue of the output-channel lane tiles (conv_lanes_f32.h) in registers: a tile of 8 pixels
// x 16 kV channels takes its channel steps with each lane's own channel operands (channel_lanes.h), the
// fused residual add (the other input's rows transposed into lanes), the rounding to fp16, and stores
// itself through a 16-bit transpose into the channels' output rows.
//
// Why: the lane tiles otherwise store fp32 sums into the block's rows and a second pass takes each
// channel's row through its steps (half_output.h); on MobileNetV2's 14x14 and 7x7 expansions (64 to 160
// input channels) that pass was a sixth of the layer. Each element goes through the same float
// operations in the same order as on the row path (half_steps_avx512.h), so the bits are the same.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "channel_lanes.h"
#include "conv_lanes_f32.h"
#include "half_convert_avx512.h"
#include "half_output.h"
#include "x86_simd.h"

namespace softdla::cpu::lanes_f32 {

// Where a tile's results go: channels [k0, k0 + channels) of image `image` at output index hw0 on
// (k0 a multiple of 16; the tile's grid is its output: a 1x1 convolution of stride 1 without padding).
struct HalfSink {
  const HalfOutput* o;
  uint32_t image;
  size_t k0, channels, hw0;
};

#ifdef SOFTDLA_X86
namespace detail {

// Word permutes of the 16-bit transposes. Four vectors of two pixels' 16 channels (pixel 2 j in words
// 0-15, 2 j + 1 in 16-31) <-> four vectors of four channels' 8 pixels (channel 4 k + c at words 8 c ..
// 8 c + 7): a permute of each pair of sources and a blend of the two results.
template <class Source>
constexpr std::array<uint16_t, 32> word_index(Source source) {  // lane -> the source word it takes
  std::array<uint16_t, 32> idx{};
  for (size_t lane = 0; lane < 32; ++lane) idx[lane] = uint16_t(source(lane));
  return idx;
}
constexpr std::array<uint16_t, 32> to_rows_index(size_t k) {  // lane 8 c + p <- pixel p % 4 of its pair
  return word_index([k](size_t lane) { return (lane % 8 % 4) / 2 * 32 + lane % 2 * 16 + 4 * k + lane / 8; });
}
constexpr std::array<uint16_t, 32> to_pixels_index(size_t j) {  // lane 16 q + c <- channel c % 8 of its pair
  return word_index([j](size_t lane) { return (lane % 8) / 4 * 32 + lane % 4 * 8 + 2 * j + lane / 16; });
}
inline constexpr std::array<std::array<uint16_t, 32>, 4> kToRows{to_rows_index(0), to_rows_index(1), to_rows_index(2),
                                                                  to_rows_index(3)};
inline constexpr std::array<std::array<uint16_t, 32>, 4> kToPixels{to_pixels_index(0), to_pixels_index(1),
                                                                    to_pixels_index(2), to_pixels_index(3)};
inline constexpr __mmask32 kUpperPixels = 0xF0F0F0F0;    // words of pixels 4-7 in a rows vector
inline constexpr __mmask32 kUpperChannels = 0xFF00FF00;  // words of channels 8-15 in a pixels vector

// h[p]: pixel p's 16 channels as fp16. Stored as channel c's 8 pixels at out + c ld, channels [0, live).
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline void store_rows(const __m256i (&h)[8],
                                                                                          uint16_t* out, size_t ld,
                                                                                          size_t live) {
  __m512i pairs[4], rows[4];
#pragma GCC unroll 4
  for (size_t j = 0; j < 4; ++j) pairs[j] = _mm512_inserti64x4(_mm512_castsi256_si512(h[2 * j]), h[2 * j + 1], 1);
#pragma GCC unroll 4
  for (size_t k = 0; k < 4; ++k) {
    const __m512i idx = _mm512_loadu_si512(kToRows[k].data());
    rows[k] = _mm512_mask_blend_epi16(kUpperPixels, _mm512_permutex2var_epi16(pairs[0], idx, pairs[1]),
                                      _mm512_permutex2var_epi16(pairs[2], idx, pairs[3]));
  }
  if (live == 16) {
#pragma GCC unroll 4
    for (size_t k = 0; k < 4; ++k) {
      uint16_t* row = out + 4 * k * ld;
      _mm_storeu_si128(reinterpret_cast<__m128i*>(row), _mm512_extracti32x4_epi32(rows[k], 0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(row + ld), _mm512_extracti32x4_epi32(rows[k], 1));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(row + 2 * ld), _mm512_extracti32x4_epi32(rows[k], 2));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(row + 3 * ld), _mm512_extracti32x4_epi32(rows[k], 3));
    }
    return;
  }
  alignas(64) uint16_t stage[16][8];
#pragma GCC unroll 4
  for (size_t k = 0; k < 4; ++k) _mm512_store_si512(stage[4 * k], rows[k]);
  for (size_t c = 0; c < live; ++c) std::memcpy(out + c * ld, stage[c], sizeof(stage[c]));
}

// Channel c's 8 pixels at in + c ld (channels [0, live), the rest zeros) as 8 vectors of fp32, pixel p's
// 16 channels in x[p].
__attribute__((target("avx512f,avx512bw,avx512vl,f16c"), always_inline)) inline void load_rows(const uint16_t* in,
                                                                                              size_t ld, size_t live,
                                                                                              __m512 (&x)[8]) {
  __m512i rows[4];
  if (live == 16) {
#pragma GCC unroll 4
    for (size_t k = 0; k < 4; ++k) {
      const uint16_t* row = in + 4 * k * ld;
      __m512i r = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row)));
      r = _mm512_inserti32x4(r, _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + ld)), 1);
      r = _mm512_inserti32x4(r, _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * ld)), 2);
      rows[k] = _mm512_inserti32x4(r, _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 3 * ld)), 3);
    }
  } else {
    alignas(64) uint16_t stage[16][8] = {};
    for (size_t c = 0; c < live; ++c) std::memcpy(stage[c], in + c * ld, sizeof(stage[c]));
#pragma GCC unroll 4
    for (size_t k = 0; k < 4; ++k) rows[k] = _mm512_load_si512(stage[4 * k]);
  }
#pragma GCC unroll 4
  for (size_t j = 0; j < 4; ++j) {
    const __m512i idx = _mm512_loadu_si512(kToPixels[j].data());
    const __m512i pair = _mm512_mask_blend_epi16(kUpperChannels, _mm512_permutex2var_epi16(rows[0], idx, rows[1]),
                                                 _mm512_permutex2var_epi16(rows[2], idx, rows[3]));
    x[2 * j] = _mm512_cvtph_ps(_mm512_castsi512_si256(pair));
    x[2 * j + 1] = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(pair, 1));
  }
}

}  // namespace detail

// An 8-pixel tile of kV vectors of output channels, stored as fp16 through the sink's epilogue.
template <size_t kV>
__attribute__((target("avx512f,avx512bw,avx512vl,fma,f16c"), noinline)) void tile_to_halves(const float* panel,
                                                                                           const float* x,
                                                                                           size_t plane_px,
                                                                                           size_t channels,
                                                                                           const HalfSink& sink) {
  __m512 c[kTilePixels][kV];
  accumulate(panel, x, plane_px, channels, c);
  const HalfOutput& o = *sink.o;
#pragma GCC unroll 3
  for (size_t v = 0; v < kV; ++v) {
    const size_t live = std::min<size_t>(16, sink.channels - 16 * v), k = sink.k0 + 16 * v;
    __m512 y[kTilePixels];
#pragma GCC unroll 8
    for (size_t p = 0; p < kTilePixels; ++p) y[p] = c[p][v];
    apply_channel_lanes(o.lanes->kinds.data(), o.lanes->block(k / 16), o.lanes->n_steps, y);
    const size_t at = sink.image * o.image_stride + k * o.ld + sink.hw0;
    if (o.other) {
      __m512 theirs[kTilePixels];
      detail::load_rows(o.other + at, o.ld, live, theirs);
#pragma GCC unroll 8
      for (size_t p = 0; p < kTilePixels; ++p) y[p] = _mm512_add_ps(_mm512_cvtph_ps(to_halves_avx512(y[p])), theirs[p]);
      apply_channel_lanes(o.lanes_after->kinds.data(), o.lanes_after->block(k / 16), o.lanes_after->n_steps, y);
    }
    __m256i h[kTilePixels];
#pragma GCC unroll 8
    for (size_t p = 0; p < kTilePixels; ++p) h[p] = to_halves_avx512(y[p]);
    detail::store_rows(h, o.out + at, o.ld, live);
  }
}

using HalfTileFn = void (*)(const float*, const float*, size_t, size_t, const HalfSink&);

// The 8-pixel tile for a block of `channels` output channels (1 to 48).
inline HalfTileFn tile_to_halves_for(size_t channels) {
  return channels <= 16 ? tile_to_halves<1> : channels <= 32 ? tile_to_halves<2> : tile_to_halves<3>;
}
#endif

}  // namespace softdla::cpu::lanes_f32
