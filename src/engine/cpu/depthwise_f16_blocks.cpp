#include "depthwise_f16_blocks.h"

#include <algorithm>
#include <cstring>

#include "half_convert_avx512.h"
#include "half_transpose_avx512.h"
#include "half_convert_f16c.h"
#include "half_convert.h"
#include "channel_lanes.h"
#include "x86_simd.h"

namespace softdla::cpu {
namespace {

constexpr size_t kLanes = 16;  // channels of a block, pixels of a transpose
constexpr size_t kPixels = 8;  // output pixels computed together (independent FMA chains)

// A thread's buffers, reused across units and layers: the ring of padded input rows and a zero row for
// the rows above and below the input. 64-byte aligned, so each pixel of a row is one aligned vector.
struct BlockScratch {
  std::vector<float> ring_storage, zero_storage;
  float* ring = nullptr;
  const float* zero = nullptr;
  std::vector<int64_t> slot_row;  // the input row each ring slot holds, -1: none
  std::vector<const float*> rows;  // an output row's kernel rows

  static float* aligned(std::vector<float>& v, size_t floats) {
    v.resize(floats + kLanes);  // new elements are zeros
    const auto p = reinterpret_cast<uintptr_t>(v.data());
    return reinterpret_cast<float*>((p + 63) & ~uintptr_t(63));
  }
};

}  // namespace

bool DepthwiseF16Blocks::applies(Isa isa) {
#ifdef SOFTDLA_X86
  return has_avx512(isa) || (isa >= Isa::kAvx2 && cpu_has_f16c());
#else
  (void)isa;
  return false;
#endif
}

DepthwiseF16Blocks::DepthwiseF16Blocks(const DepthwiseGeometry& g, uint32_t channels, const float* weights,
                                       const std::vector<ChannelStep>& steps)
    : g_(g), channels_(channels), blocks_((channels + kLanes - 1) / kLanes), taps_(size_t(g.R) * g.S),
      wide_(has_avx512(active_isa())) {
  // Every output column of the last whole group of 16 (AVX-512) or 8 (AVX2) is computed (the extra ones
  // are never stored), so a ring row reaches the farthest tap of column ceil16(OW) - 1.
  const size_t last_column = (g.OW + kLanes - 1) / kLanes * kLanes - 1;
  padded_width_ = std::max<size_t>(size_t(g.pl) + g.W, last_column * g.sw + size_t(g.S - 1) * g.dw + 1);
  weights_.assign(size_t(blocks_) * taps_ * kLanes, 0.f);
  for (uint32_t k = 0; k < channels; ++k)
    for (size_t t = 0; t < taps_; ++t) weights_[((k / kLanes) * taps_ + t) * kLanes + k % kLanes] = weights[k * taps_ + t];
  lanes_ = ChannelLanes(steps, channels);
}

uint32_t DepthwiseF16Blocks::bands(uint32_t batch, size_t threads) const {
  // Four units per thread where the blocks alone are fewer; a band keeps at least four output rows (each
  // band reads its kernel's extra rows again).
  const size_t blocks = size_t(batch) * blocks_, want = 4 * threads;
  if (threads <= 1 || blocks >= want) return 1;
  const size_t bands = (want + blocks - 1) / blocks;
  return uint32_t(std::clamp<size_t>(bands, 1, std::max<size_t>(1, g_.OH / 4)));
}

size_t DepthwiseF16Blocks::units(uint32_t batch, size_t threads) const {
  return size_t(batch) * blocks_ * bands(batch, threads);
}

#ifdef SOFTDLA_X86
namespace {

// ---- AVX-512: sixteen channels a vector, eight output pixels a step (eight chains), rows and columns
// transposed on the fp16 data.
struct Avx512Kernel {
  static constexpr uint32_t kGroup = 16;
  static void widen_row(const uint16_t* x, size_t plane, uint32_t valid, const DepthwiseGeometry& g, size_t ih,
                        const uint16_t* end, float* dst);
  static void row(const DepthwiseGeometry& g, const float* const* rows, const float* w, const SdpKind* kinds,
                  const float* ops, size_t n_steps, uint32_t valid, uint16_t* out, size_t plane);
};

// Input row ih of channels [0, valid) (planes x + k * plane) as fp32 [pl + w][16] of a ring row;
// the padding columns are left as they are (zeros). Eight columns at a time through a 16-bit transpose
// (half_transpose_avx512.h): a 16 x 16 fp32 transpose per sixteen columns was most of a stride-2 layer.
__attribute__((target("avx512f,avx512bw,avx512vl,f16c"))) inline void Avx512Kernel::widen_row(
    const uint16_t* x, size_t plane, uint32_t valid, const DepthwiseGeometry& g, size_t ih, const uint16_t* end,
    float* dst) {
  for (size_t w0 = 0; w0 < g.W; w0 += kPixels) {
    const size_t n = std::min<size_t>(kPixels, g.W - w0);
    // The same columns kRowsAhead input rows further, widened one or two output rows later: sixteen
    // planes read a row at a time are more streams than the prefetchers follow well (MobileNetV2 FP16
    // 0.97-0.99x the time; batch 8 on one thread 0.92-0.97x). One per line.
    constexpr size_t kRowsAhead = 2;
    const size_t held = size_t(end - x);  // halves from x to the end of the batch's input
    if (w0 % 32 == 0)
      for (uint32_t c = 0; c < valid; ++c) {
        const size_t ahead = c * plane + (ih + kRowsAhead) * g.W + w0;
        if (ahead < held) _mm_prefetch(reinterpret_cast<const char*>(x + ahead), _MM_HINT_T0);
      }
    __m512 v[kPixels];
    load_half_rows(x + ih * g.W + w0, plane, valid, v, n);
    float* d = dst + (g.pl + w0) * kLanes;
    // Unrolled with constant indices: as a loop to n, GCC turns the stores into a memcpy from v spilled
    // to the stack (rep movsq: a third of a 112 x 112 layer).
#pragma GCC unroll 8
    for (size_t j = 0; j < kPixels; ++j)
      if (j < n) _mm512_store_ps(d + j * kLanes, v[j]);
  }
}

// Eight output pixels from column ow of an output row whose kernel rows are rows[0 .. R): the FMA chain
// over the taps in (r, s) order, then the steps; into acc[0 .. 8).
__attribute__((target("avx512f"), always_inline)) inline void eight_pixels(const DepthwiseGeometry& g,
                                                                         const float* const* rows, size_t ow,
                                                                         const float* w, const SdpKind* kinds,
                                                                         const float* ops, size_t n_steps,
                                                                         __m512 (&acc)[kPixels]) {
  for (size_t p = 0; p < kPixels; ++p) acc[p] = _mm512_setzero_ps();
  const size_t step = size_t(g.sw) * kLanes;
  for (uint32_t r = 0; r < g.R; ++r) {
    const float* row = rows[r] + ow * step;
    for (uint32_t s = 0; s < g.S; ++s, w += kLanes) {
      const __m512 wv = _mm512_loadu_ps(w);
      const float* x = row + size_t(s) * g.dw * kLanes;
      for (size_t p = 0; p < kPixels; ++p) acc[p] = _mm512_fmadd_ps(_mm512_load_ps(x + p * step), wv, acc[p]);
    }
  }
  apply_channel_lanes(kinds, ops, n_steps, acc);
}

// Eight pixels at a time: rounded to fp16 one pixel vector at a time (the same rule per element as a
// channel row's store) and written to their planes' row (out + c * plane), channels [0, valid), through
// a 16-bit transpose.
__attribute__((target("avx512f,avx512bw,avx512vl,f16c"))) inline void Avx512Kernel::row(
    const DepthwiseGeometry& g, const float* const* rows, const float* w, const SdpKind* kinds, const float* ops,
    size_t n_steps, uint32_t valid, uint16_t* out, size_t plane) {
  for (size_t ow = 0; ow < g.OW; ow += kPixels) {
    __m512 acc[kPixels];
    eight_pixels(g, rows, ow, w, kinds, ops, n_steps, acc);
    __m256i h[kPixels];
#pragma GCC unroll 8
    for (size_t p = 0; p < kPixels; ++p) h[p] = to_halves_avx512(acc[p]);
    store_half_rows(h, out + ow, plane, valid, std::min<size_t>(kPixels, g.OW - ow));
  }
}

// ---- AVX2 (with F16C and FMA): eight channels a vector, eight output pixels a step, all in registers.
struct Avx2Kernel {
  static constexpr uint32_t kGroup = 8;
  static void widen_row(const uint16_t* x, size_t plane, uint32_t valid, const DepthwiseGeometry& g, size_t ih,
                        const uint16_t* end, float* dst);
  static void row(const DepthwiseGeometry& g, const float* const* rows, const float* w, const SdpKind* kinds,
                  const float* ops, size_t n_steps, uint32_t valid, uint16_t* out, size_t plane);
};

// r[i] lane j -> r[j] lane i.
__attribute__((target("avx2"), always_inline)) inline void transpose8(__m256 (&r)[8]) {
  __m256 t[8];
  for (int i = 0; i < 8; i += 2) t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]), t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  // t[2q] holds elements (0, 1 | 4, 5) of rows 2q, 2q + 1 interleaved; t[2q + 1] elements (2, 3 | 6, 7).
  __m256 u[8];
  for (int h = 0; h < 2; ++h) {  // rows 4h .. 4h + 3
    const __m256 a = t[4 * h], b = t[4 * h + 1], c = t[4 * h + 2], d = t[4 * h + 3];
    u[4 * h + 0] = _mm256_shuffle_ps(a, c, 0x44);  // element 0 | 4 of the four rows
    u[4 * h + 1] = _mm256_shuffle_ps(a, c, 0xee);  // 1 | 5
    u[4 * h + 2] = _mm256_shuffle_ps(b, d, 0x44);  // 2 | 6
    u[4 * h + 3] = _mm256_shuffle_ps(b, d, 0xee);  // 3 | 7
  }
  for (int m = 0; m < 4; ++m) {
    r[m] = _mm256_permute2f128_ps(u[m], u[4 + m], 0x20);
    r[4 + m] = _mm256_permute2f128_ps(u[m], u[4 + m], 0x31);
  }
}

// The first n (1 to 8) halves of a row from src; a whole 16-byte load where it ends before `end` (the
// extra lanes are columns never stored), else a copy.
__attribute__((target("avx2,f16c"), always_inline)) inline __m256 load_halves(const uint16_t* src, size_t n,
                                                                            const uint16_t* end) {
  if (src + 8 <= end) return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src)));
  alignas(16) uint16_t part[8] = {};
  std::memcpy(part, src, n * sizeof(uint16_t));
  return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(part)));
}

__attribute__((target("avx2,f16c"))) inline void Avx2Kernel::widen_row(const uint16_t* x, size_t plane, uint32_t valid,
                                                              const DepthwiseGeometry& g, size_t ih,
                                                              const uint16_t* end, float* dst) {
  for (size_t w0 = 0; w0 < g.W; w0 += kGroup) {
    const size_t n = std::min<size_t>(kGroup, g.W - w0);
    __m256 v[8];
    for (uint32_t c = 0; c < 8; ++c)
      v[c] = c < valid ? load_halves(x + c * plane + ih * g.W + w0, n, end) : _mm256_setzero_ps();
    transpose8(v);
    float* d = dst + (g.pl + w0) * kGroup;
#pragma GCC unroll 8
    for (size_t j = 0; j < 8; ++j)  // constant indices, as on AVX-512
      if (j < n) _mm256_store_ps(d + j * kGroup, v[j]);
  }
}

__attribute__((target("avx2,fma,f16c"))) inline void Avx2Kernel::row(const DepthwiseGeometry& g, const float* const* rows,
                                                            const float* w0, const SdpKind* kinds, const float* ops,
                                                            size_t n_steps, uint32_t valid, uint16_t* out,
                                                            size_t plane) {
  const size_t step = size_t(g.sw) * kGroup;
  for (size_t ow = 0; ow < g.OW; ow += kPixels) {
    // The FMA chain over the taps in (r, s) order, as on AVX-512; a block's weights are 16 lanes a tap.
    __m256 acc[kPixels];
    for (size_t p = 0; p < kPixels; ++p) acc[p] = _mm256_setzero_ps();
    const float* w = w0;
    for (uint32_t r = 0; r < g.R; ++r) {
      const float* row = rows[r] + ow * step;
      for (uint32_t s = 0; s < g.S; ++s, w += kLanes) {
        const __m256 wv = _mm256_loadu_ps(w);
        const float* x = row + size_t(s) * g.dw * kGroup;
        for (size_t p = 0; p < kPixels; ++p) acc[p] = _mm256_fmadd_ps(_mm256_load_ps(x + p * step), wv, acc[p]);
      }
    }
    apply_channel_lanes(kinds, ops, n_steps, acc);
    transpose8(acc);  // acc[c]: channel c's eight pixels
    const size_t n = std::min<size_t>(kPixels, g.OW - ow);
    for (uint32_t c = 0; c < valid; ++c) store_first_halves(to_halves_f16c(acc[c]), n, out + c * plane + ow);
  }
}

}  // namespace

// Each unit's block in groups of K::kGroup channels: the group's ring of widened input rows, then its
// output rows one by one. Inlined into each path's entry (run_avx512, run_avx2) with its kernels: calls
// per row cost a third of a 56 x 56 layer.
template <class K>
__attribute__((always_inline)) inline void DepthwiseF16Blocks::run_groups(const uint16_t* x, uint16_t* y, uint32_t batch, size_t threads, size_t begin,
                                    size_t end) const {
  thread_local BlockScratch scratch;
  const DepthwiseGeometry& g = g_;
  const uint32_t n_bands = bands(batch, threads);
  const size_t span = size_t(g.R - 1) * g.dh + 1, row_floats = padded_width_ * K::kGroup;
  const size_t in_plane = size_t(g.H) * g.W, out_plane = size_t(g.OH) * g.OW;
  const uint16_t* x_end = x + size_t(batch) * channels_ * in_plane;
  float* ring = BlockScratch::aligned(scratch.ring_storage, span * row_floats);
  const float* zero = BlockScratch::aligned(scratch.zero_storage, padded_width_ * kLanes);
  std::vector<const float*>& rows = scratch.rows;
  rows.resize(g.R);
  for (size_t unit = begin; unit < end; ++unit) {
    const uint32_t band = uint32_t(unit % n_bands), block = uint32_t(unit / n_bands % blocks_);
    const uint32_t image = uint32_t(unit / n_bands / blocks_);
    const uint32_t k0 = block * uint32_t(kLanes), valid = std::min<uint32_t>(uint32_t(kLanes), channels_ - k0);
    const uint32_t oh0 = uint32_t(size_t(g.OH) * band / n_bands), oh1 = uint32_t(size_t(g.OH) * (band + 1) / n_bands);
    for (uint32_t c0 = 0; c0 < valid; c0 += K::kGroup) {
      const uint32_t group_valid = std::min<uint32_t>(K::kGroup, valid - c0);
      const uint16_t* xb = x + (size_t(image) * channels_ + k0 + c0) * in_plane;
      uint16_t* yb = y + (size_t(image) * channels_ + k0 + c0) * out_plane;
      const float* w = weights_.data() + size_t(block) * taps_ * kLanes + c0;
      const float* ops = lanes_.block(block) + c0;
      // The ring rows' padding columns are zeros: another layer may have used the scratch with other widths.
      scratch.slot_row.assign(span, -1);
      for (size_t i = 0; i < span; ++i) {
        float* row = ring + i * row_floats;
        std::memset(row, 0, size_t(g.pl) * K::kGroup * sizeof(float));
        std::memset(row + (size_t(g.pl) + g.W) * K::kGroup, 0, (padded_width_ - g.pl - g.W) * K::kGroup * sizeof(float));
      }
      for (uint32_t oh = oh0; oh < oh1; ++oh) {
        for (uint32_t r = 0; r < g.R; ++r) {
          const int64_t ih = int64_t(oh) * g.sh - g.pt + int64_t(r) * g.dh;
          if (ih < 0 || ih >= int64_t(g.H)) {
            rows[r] = zero;
            continue;
          }
          const size_t slot = size_t(ih) % span;
          float* row = ring + slot * row_floats;
          if (scratch.slot_row[slot] != ih) {
            K::widen_row(xb, in_plane, group_valid, g, size_t(ih), x_end, row);
            scratch.slot_row[slot] = ih;
          }
          rows[r] = row;
        }
        K::row(g, rows.data(), w, lanes_.kinds.data(), ops, lanes_.n_steps, group_valid, yb + size_t(oh) * g.OW,
               out_plane);
      }
    }
  }
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) void DepthwiseF16Blocks::run_avx512(
    const uint16_t* x, uint16_t* y, uint32_t batch, size_t threads, size_t begin, size_t end) const {
  run_groups<Avx512Kernel>(x, y, batch, threads, begin, end);
}

__attribute__((target("avx2,fma,f16c"))) void DepthwiseF16Blocks::run_avx2(const uint16_t* x, uint16_t* y,
                                                                         uint32_t batch, size_t threads,
                                                                         size_t begin, size_t end) const {
  run_groups<Avx2Kernel>(x, y, batch, threads, begin, end);
}

void DepthwiseF16Blocks::run(const uint16_t* x, uint16_t* y, uint32_t batch, size_t threads, size_t begin,
                             size_t end) const {
  if (wide_) return run_avx512(x, y, batch, threads, begin, end);
  run_avx2(x, y, batch, threads, begin, end);
}
#else
void DepthwiseF16Blocks::run(const uint16_t*, uint16_t*, uint32_t, size_t, size_t, size_t) const {}
#endif

}  // namespace softdla::cpu
