#include "conv_implicit_f32.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "conv_implicit.h"
#include "cpu_isa.h"
#include "f32_tile_rows.h"
#include "half_convert.h"
#include "half_convert_avx512.h"
#include "implicit_grid.h"
#include "numerics.h"
#include "scratch_buffer.h"
#include "x86_simd.h"

namespace softdla::cpu {
namespace {

// Register tiles of 12 output channels x 32 grid pixels (24 accumulators); one work unit is 24 channels
// x 64 pixels.
constexpr size_t kTileRows = 12, kTilePixels = 32;
constexpr size_t kBlockRows = 24, kBlockPixels = 64;
constexpr size_t kHalvesMaxRows = 160;  // output channels up to which a 1x1 tile widens fp16 itself (measured:
                                         // 24-96 faster, 128-160 alike, from 256 slower than widening once)
constexpr size_t kAhead = 8;  // channels a 1x1 tile prefetches its input ahead (4 to 16 measured alike)

#ifdef SOFTDLA_X86
__attribute__((target("avx512f,avx512bw,avx512vl,f16c"))) void even_halves_to_floats(const uint16_t* src, size_t n,
                                                                                    float* d) {
  for (size_t i = 0; i < n; i += 16) {
    const size_t values = std::min<size_t>(16, n - i);
    const __mmask16 m = __mmask16((1u << values) - 1);
    _mm512_mask_storeu_ps(d + i, m, _mm512_maskz_cvtph_ps(m, even_halves_avx512(src + 2 * i, values)));
  }
}

// 12 rows of A (row stride lda floats, k = c * taps + t) x 32 grid pixels: b points at the tile's first
// pixel in plane 0, planes plane_px floats apart; offsets[t] shifts to tap t. kOneTap: a 1x1 convolution,
// whose only tap has offset 0 (no tap loop inside the channel loop).
// T = uint16_t (a 1x1 convolution only, its fp16 input read as it is: the planes are the input channels):
// each step's 32 pixels widened in registers, `valid` of them read and the rest as zeros (past the plane's
// end); the same products in the same order as from the widened planes, so the same sums.
template <bool kOneTap, size_t kTaps = 0, class T = float>
__attribute__((target("avx512f,avx512bw,avx512vl,fma,f16c"))) void tile_taps_f32(
    const float* a, size_t lda, const T* b, size_t plane_px, const size_t* offsets, size_t taps, size_t channels,
    float* out, size_t ld, size_t valid = kTilePixels) {
  static_assert(kOneTap || std::is_same_v<T, float>);
  const size_t l1 = lda * sizeof(float), l3 = 3 * l1, l5 = 5 * l1;
  const char* pa = reinterpret_cast<const char*>(a);
  const char* pb = pa + 6 * l1;
#define DECLARE(r) __m512 c##r##0 = _mm512_setzero_ps(), c##r##1 = c##r##0;
  SOFTDLA_F32_ROWS12(DECLARE)
#undef DECLARE
#define STEP(r)                                                                                          \
  {                                                                                                      \
    const __m512 w = _mm512_set1_ps(*reinterpret_cast<const float*>(((r) < 6 ? pa : pb) + row_offset<r>(l1, l3, l5))); \
    c##r##0 = _mm512_fmadd_ps(w, x0, c##r##0);                                                          \
    c##r##1 = _mm512_fmadd_ps(w, x1, c##r##1);                                                          \
  }
  if constexpr (kOneTap && std::is_same_v<T, uint16_t>) {
    const __mmask16 m0 = valid >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << valid) - 1);
    const __mmask16 m1 = valid >= 32 ? __mmask16(0xFFFF) : valid <= 16 ? __mmask16(0) : __mmask16((1u << (valid - 16)) - 1);
    for (size_t c = 0; c < channels; ++c, b += plane_px, pa += sizeof(float), pb += sizeof(float)) {
      _mm_prefetch(reinterpret_cast<const char*>(b + kAhead * plane_px), _MM_HINT_T0);
      const __m512 x0 = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m0, b));
      const __m512 x1 = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m1, b + 16));
      SOFTDLA_F32_ROWS12(STEP)
    }
  } else if constexpr (kOneTap) {
    for (size_t c = 0; c < channels; ++c, b += plane_px, pa += sizeof(float), pb += sizeof(float)) {
      // The planes are far apart (one per channel), each step a new pair of lines: fetched kAhead
      // channels early they are in L1 when read (a 512-channel 1x1 layer: 0.98 -> 0.66 ms on a Xeon).
      _mm_prefetch(reinterpret_cast<const char*>(b + kAhead * plane_px), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(b + kAhead * plane_px + 16), _MM_HINT_T0);
      const __m512 x0 = _mm512_loadu_ps(b), x1 = _mm512_loadu_ps(b + 16);
      SOFTDLA_F32_ROWS12(STEP)
    }
  } else {
    size_t offs[kTaps ? kTaps : 1];
    if constexpr (kTaps != 0)
      for (size_t t = 0; t < kTaps; ++t) offs[t] = offsets[t];
    for (size_t c = 0; c < channels; ++c, b += plane_px) {
#pragma GCC unroll 9
      for (size_t t = 0; t < (kTaps ? kTaps : taps); ++t, pa += sizeof(float), pb += sizeof(float)) {
        const float* x = b + (kTaps ? offs[t] : offsets[t]);
        const __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
        SOFTDLA_F32_ROWS12(STEP)
      }
    }
  }
#undef STEP
#define STORE(r) _mm512_storeu_ps(out + (r) * ld, c##r##0), _mm512_storeu_ps(out + (r) * ld + 16, c##r##1);
  SOFTDLA_F32_ROWS12(STORE)
#undef STORE
}
#endif

// d[i] = float(src[i * stride]) for i < n: stride 1 as halves_to_floats; stride 2 sixteen at a time
// (every second half, read under a mask that stops at the last one); other strides one by one.
void strided_halves_to_floats(const uint16_t* src, size_t stride, size_t n, float* d) {
  if (stride == 1) return halves_to_floats(src, d, n);
  size_t i = 0;
#ifdef SOFTDLA_X86
  if (stride == 2) return even_halves_to_floats(src, n, d);
#endif
  for (; i < n; ++i) d[i] = num::half_to_float(src[i * stride]);
}

void strided_floats(const float* src, size_t stride, size_t n, float* d) {
  for (size_t i = 0; i < n; ++i) d[i] = src[i * stride];
}

}  // namespace

bool ImplicitConvF32::applies(uint32_t groups) { return groups == 1 && has_avx512(active_isa()); }

ImplicitConvF32::ImplicitConvF32(const ImplicitGeometryF32& g, const float* weights) : g_(g) {
  wq_ = g.OW + size_t(g.S - 1) * g.dw / g.sw;
  hq_ = g.OH + size_t(g.R - 1) * g.dh / g.sh;
  grid_ = size_t(g.OH) * wq_;
  const size_t reach = size_t(g.R - 1) * g.dh / g.sh * wq_ + size_t(g.S - 1) * g.dw / g.sw;
  plane_px_ = (grid_ + kBlockPixels - 1) / kBlockPixels * kBlockPixels + reach;
  // Planes [used phase][C]: tap t reads its phase's planes, shifted by its grid offset.
  StridePhases sp =
      stride_phases(ImplicitGeometry{g.C, g.H, g.W, g.K, g.R, g.S, g.OH, g.OW, g.sh, g.sw, g.dh, g.dw, g.pt, g.pl}, wq_);
  used_phases_ = std::move(sp.phases);
  for (size_t t = 0; t < sp.slot.size(); ++t) tap_offsets_.push_back(sp.slot[t] * g.C * plane_px_ + sp.offset[t]);
  k_rows_ = (size_t(g.K) + kBlockRows - 1) / kBlockRows * kBlockRows;
  // Stride 1 without padding: the planes are the input channels as they are. A 1x1 convolution of that
  // kind with few output channels (each input value read by K / 12 tiles) has its tiles widen the fp16
  // input themselves.
  plain_planes_ = g.pt == 0 && g.pl == 0 && g.sh == 1 && g.sw == 1 && wq_ == g.W && hq_ == g.H;
  reads_halves_ = plain_planes_ && g.R == 1 && g.S == 1 && g.K <= kHalvesMaxRows;
  const size_t kdim = size_t(g.C) * g.R * g.S;
  weights_.assign(k_rows_ * kdim, 0.f);
  std::copy_n(weights, size_t(g.K) * kdim, weights_.begin());  // [K][C][R][S] is already k = (c, r, s)
}

// Planes [u0, u1), u = (used phase) * C + channel: the phase's rows and columns of the zero-padded
// input, widened to fp32.
void ImplicitConvF32::pack(const void* x, bool halves, float* planes, size_t u0, size_t u1) const {
  const size_t hw = size_t(g_.H) * g_.W;
  for (size_t u = u0; u < u1; ++u) {
    const size_t phase = used_phases_[u / g_.C], c = u % g_.C, pa = phase / g_.sw, pb = phase % g_.sw;
    float* dst = planes + u * plane_px_;
    if (plain_planes_) {
      // Stride 1 without padding (plain_planes_): the plane is the input channel, then zeros to the
      // block's end.
      if (halves) halves_to_floats(static_cast<const uint16_t*>(x) + c * hw, dst, hw);
      else std::memcpy(dst, static_cast<const float*>(x) + c * hw, hw * sizeof(float));
      std::fill(dst + hw, dst + plane_px_, 0.f);
      continue;
    }
    std::fill_n(dst, plane_px_, 0.f);
    const PhaseColumns cols = phase_columns(g_.W, g_.pl, g_.sw, wq_, pb);
    const size_t b0 = cols.first, b1 = cols.past;
    if (b0 >= b1) continue;
    for (size_t a = 0; a < hq_; ++a) {
      const int64_t i = int64_t(pa + a * g_.sh) - g_.pt;  // phase row a is input row i
      if (i < 0 || i >= g_.H) continue;
      const size_t src = (c * g_.H + size_t(i)) * g_.W + (pb + b0 * g_.sw - g_.pl);
      float* d = dst + a * wq_ + b0;
      if (halves) strided_halves_to_floats(static_cast<const uint16_t*>(x) + src, g_.sw, b1 - b0, d);
      else strided_floats(static_cast<const float*>(x) + src, g_.sw, b1 - b0, d);
    }
  }
}

void ImplicitConvF32::block(const float* planes, const uint16_t* halves, uint32_t n, size_t row0, size_t pix0,
                            const Epilogue& epilogue, const HalfOutput* direct) const {
#ifdef SOFTDLA_X86
  const size_t taps = tap_offsets_.size(), kdim = size_t(g_.C) * taps;
  alignas(64) float sums[kBlockRows * kBlockPixels];
  const size_t rows = std::min<size_t>(kBlockRows, g_.K - row0), pixels = std::min(kBlockPixels, grid_ - pix0);
  for (size_t p = 0; p < pixels; p += kTilePixels)
    for (size_t r = 0; r < rows; r += kTileRows) {  // rows past K: zero weights, sums nobody reads
      if (halves) {
        tile_taps_f32<true, 0, uint16_t>(weights_.data() + (row0 + r) * kdim, kdim, halves + pix0 + p, grid_, nullptr, 1,
                                         g_.C, sums + r * kBlockPixels + p, kBlockPixels,
                                         std::min(kTilePixels, grid_ - pix0 - p));
        continue;
      }
      (taps == 1 && tap_offsets_[0] == 0 ? tile_taps_f32<true> : taps == 9 ? tile_taps_f32<false, 9> : tile_taps_f32<false>)(
          weights_.data() + (row0 + r) * kdim, kdim, planes + pix0 + p, plane_px_, tap_offsets_.data(), taps, g_.C,
          sums + r * kBlockPixels + p, kBlockPixels, kTilePixels);
    }
  if (direct) {
    GridRun runs[kBlockPixels];
    const size_t n_runs = grid_runs(pix0, pixels, wq_, g_.OW, runs);
    return emit_runs_f16<kBlockRows, kBlockPixels>(sums, rows, row0, pixels, runs, n_runs, *direct, n);
  }
  emit_grid_runs(sums, kBlockPixels, rows, row0, pix0, pixels, wq_, g_.OW,
                 [&](uint32_t k, size_t hw0, float* v, size_t count) { epilogue(n, k, hw0, v, count); });
#else
  (void)planes, (void)halves, (void)row0, (void)pix0, (void)epilogue, (void)direct, (void)n;
#endif
}

void ImplicitConvF32::run(const void* x, size_t images, size_t image_stride, bool halves, ThreadPool& pool,
                          const Epilogue& epilogue, const HalfOutput* direct) const {
  const size_t row_blocks = (g_.K + kBlockRows - 1) / kBlockRows, pixel_blocks = (grid_ + kBlockPixels - 1) / kBlockPixels;
  // The units of `count` images, row blocks outermost (a chunk's units share their weights):
  // block_of(n, row0, pix0) runs one of the n-th image.
  auto units = [&](size_t count, const auto& block_of) {
    const size_t columns = count * pixel_blocks;
    pool.parallel_for(row_blocks * columns, [&](size_t b, size_t e) {
      for (size_t u = b; u < e; ++u) {
        const size_t column = u % columns;
        block_of(column / pixel_blocks, (u / columns) * kBlockRows, (column % pixel_blocks) * kBlockPixels);
      }
    });
  };
  if (halves && reads_halves_) {
    // The tiles read the fp16 input: no widened copy (for few output channels, widening the whole input
    // took a third of the layer).
    const uint16_t* xh = static_cast<const uint16_t*>(x);
    return units(images, [&](size_t n, size_t row0, size_t pix0) {
      block(nullptr, xh + n * image_stride, uint32_t(n), row0, pix0, epilogue, direct);
    });
  }
  thread_local ScratchBuffer planes;  // the calling thread's: the workers get a pointer
  const size_t slots = used_phases_.size() * g_.C, image_floats = slots * plane_px_;
  // The batch in image groups, as the INT8 implicit GEMM takes it (implicit_grid.h): the weights are
  // read once per group, not once per image.
  const size_t group = image_group(image_floats * sizeof(float), images);
  float* data = reinterpret_cast<float*>(planes.reserve(group * image_floats * sizeof(float)));
  const size_t elem = halves ? sizeof(uint16_t) : sizeof(float);
  for_each_image_group(
      pool, images, group, slots, ThreadPool::min_items(plane_px_),
      [&](size_t n, size_t slot, size_t u0, size_t u1) {
        pack(static_cast<const uint8_t*>(x) + n * image_stride * elem, halves, data + slot * image_floats, u0, u1);
      },
      [&](size_t n0, size_t count) {
        units(count, [&](size_t n, size_t row0, size_t pix0) {
          block(data + n * image_floats, nullptr, uint32_t(n0 + n), row0, pix0, epilogue, direct);
        });
      });
}

}  // namespace softdla::cpu
