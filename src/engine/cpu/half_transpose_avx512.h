// 16-bit transposes between fp16 channel rows and fp32 pixel vectors on AVX-512: eight pixels of sixteen
// channels, read from or written to sixteen channel planes (rows `ld` halves apart) with word permutes on
// the fp16 data, converted one pixel vector at a time. Shared by the FP16 kernels whose vectors hold
// channels while the tensors are planar: the lane tiles' epilogue (conv_lanes_f16_store.h) and the
// depthwise channel blocks (depthwise_f16_blocks.cpp). A 16 x 16 transpose of fp32 vectors takes four
// times the shuffles, on the port the FMAs share.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>

#include "x86_simd.h"

namespace softdla::cpu {

#ifdef SOFTDLA_X86
namespace half_transpose_detail {

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

// Channel c's halves under m at in + c ld, or zeros past the live channels.
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline __m128i masked_row(const uint16_t* in,
                                                                                             size_t ld, size_t c,
                                                                                             size_t live, __mmask8 m) {
  return c < live ? _mm_maskz_loadu_epi16(m, in + c * ld) : _mm_setzero_si128();
}

}  // namespace half_transpose_detail

// h[p]: pixel p's 16 channels as fp16. Stored as channel c's first `pixels` (1 to 8) pixels at out + c ld,
// channels [0, live); nothing past them is written.
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline void store_half_rows(
    const __m256i (&h)[8], uint16_t* out, size_t ld, size_t live, size_t pixels = 8) {
  using namespace half_transpose_detail;
  __m512i pairs[4], rows[4];
#pragma GCC unroll 4
  for (size_t j = 0; j < 4; ++j) pairs[j] = _mm512_inserti64x4(_mm512_castsi256_si512(h[2 * j]), h[2 * j + 1], 1);
#pragma GCC unroll 4
  for (size_t k = 0; k < 4; ++k) {
    const __m512i idx = _mm512_loadu_si512(kToRows[k].data());
    rows[k] = _mm512_mask_blend_epi16(kUpperPixels, _mm512_permutex2var_epi16(pairs[0], idx, pairs[1]),
                                      _mm512_permutex2var_epi16(pairs[2], idx, pairs[3]));
  }
  if (live == 16 && pixels == 8) {
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
  // Fewer channels or pixels: masked stores of each live channel's row (a staged copy cost more than
  // the transposes on 7- and 14-wide planes).
  const __mmask8 m = __mmask8((1u << pixels) - 1);
#pragma GCC unroll 4
  for (size_t k = 0; k < 4; ++k) {
    const __m128i part[4] = {_mm512_extracti32x4_epi32(rows[k], 0), _mm512_extracti32x4_epi32(rows[k], 1),
                             _mm512_extracti32x4_epi32(rows[k], 2), _mm512_extracti32x4_epi32(rows[k], 3)};
#pragma GCC unroll 4
    for (size_t i = 0; i < 4; ++i)
      if (4 * k + i < live) _mm_mask_storeu_epi16(out + (4 * k + i) * ld, m, part[i]);
  }
}

// Channel c's first `pixels` (1 to 8) pixels at in + c ld (channels [0, live); other channels and pixels
// zeros, and nothing past them read) as 8 vectors of fp32, pixel p's 16 channels in x[p].
__attribute__((target("avx512f,avx512bw,avx512vl,f16c"), always_inline)) inline void load_half_rows(
    const uint16_t* in, size_t ld, size_t live, __m512 (&x)[8], size_t pixels = 8) {
  using namespace half_transpose_detail;
  __m512i rows[4];
  if (live == 16 && pixels == 8) {
#pragma GCC unroll 4
    for (size_t k = 0; k < 4; ++k) {
      const uint16_t* row = in + 4 * k * ld;
      __m512i r = _mm512_castsi128_si512(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row)));
      r = _mm512_inserti32x4(r, _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + ld)), 1);
      r = _mm512_inserti32x4(r, _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * ld)), 2);
      rows[k] = _mm512_inserti32x4(r, _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 3 * ld)), 3);
    }
  } else {
    // Masked loads: nothing past the live channels' first `pixels` halves is read.
    const __mmask8 m = __mmask8((1u << pixels) - 1);
#pragma GCC unroll 4
    for (size_t k = 0; k < 4; ++k) {
      __m512i r = _mm512_castsi128_si512(masked_row(in, ld, 4 * k, live, m));
      r = _mm512_inserti32x4(r, masked_row(in, ld, 4 * k + 1, live, m), 1);
      r = _mm512_inserti32x4(r, masked_row(in, ld, 4 * k + 2, live, m), 2);
      rows[k] = _mm512_inserti32x4(r, masked_row(in, ld, 4 * k + 3, live, m), 3);
    }
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
#endif

}  // namespace softdla::cpu
