#include "conv_implicit_f32.h"

#include <algorithm>
#include <cstring>

#include "cpu_isa.h"
#include "f32_tile_rows.h"
#include "half_convert.h"
#include "implicit_grid.h"
#include "scratch_buffer.h"
#include "x86_simd.h"

namespace softdla::cpu {
namespace {

// Register tiles of 12 output channels x 32 grid pixels (24 accumulators); one work unit is 24 channels
// x 64 pixels.
constexpr size_t kTileRows = 12, kTilePixels = 32;
constexpr size_t kBlockRows = 24, kBlockPixels = 64;

#ifdef SOFTDLA_X86
// 12 rows of A (row stride lda floats, k = c * taps + t) x 32 grid pixels: b points at the tile's first
// pixel in plane 0, planes plane_px floats apart; offsets[t] shifts to tap t.
__attribute__((target("avx512f,fma"))) void tile_taps_f32(const float* a, size_t lda, const float* b, size_t plane_px,
                                                          const size_t* offsets, size_t taps, size_t channels,
                                                          float* out, size_t ld) {
  const size_t l1 = lda * sizeof(float), l3 = 3 * l1, l5 = 5 * l1;
  const char* pa = reinterpret_cast<const char*>(a);
  const char* pb = pa + 6 * l1;
#define DECLARE(r) __m512 c##r##0 = _mm512_setzero_ps(), c##r##1 = c##r##0;
  SOFTDLA_F32_ROWS12(DECLARE)
#undef DECLARE
  for (size_t c = 0; c < channels; ++c, b += plane_px) {
    for (size_t t = 0; t < taps; ++t, pa += sizeof(float), pb += sizeof(float)) {
      const float* x = b + offsets[t];
      const __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
#define STEP(r)                                                                                          \
  {                                                                                                      \
    const __m512 w = _mm512_set1_ps(*reinterpret_cast<const float*>(((r) < 6 ? pa : pb) + row_offset<r>(l1, l3, l5))); \
    c##r##0 = _mm512_fmadd_ps(w, x0, c##r##0);                                                          \
    c##r##1 = _mm512_fmadd_ps(w, x1, c##r##1);                                                          \
  }
      SOFTDLA_F32_ROWS12(STEP)
#undef STEP
    }
  }
#define STORE(r) _mm512_storeu_ps(out + (r) * ld, c##r##0), _mm512_storeu_ps(out + (r) * ld + 16, c##r##1);
  SOFTDLA_F32_ROWS12(STORE)
#undef STORE
}
#endif

}  // namespace

bool ImplicitConvF32::applies(uint32_t groups, uint32_t sh, uint32_t sw) {
  return groups == 1 && sh == 1 && sw == 1 && has_avx512(active_isa());
}

ImplicitConvF32::ImplicitConvF32(const ImplicitGeometryF32& g, const float* weights) : g_(g) {
  wq_ = g.OW + size_t(g.S - 1) * g.dw;
  hq_ = g.OH + size_t(g.R - 1) * g.dh;
  grid_ = size_t(g.OH) * wq_;
  const size_t reach = size_t(g.R - 1) * g.dh * wq_ + size_t(g.S - 1) * g.dw;
  plane_px_ = (grid_ + kBlockPixels - 1) / kBlockPixels * kBlockPixels + reach;
  for (uint32_t r = 0; r < g.R; ++r)
    for (uint32_t s = 0; s < g.S; ++s) tap_offsets_.push_back(size_t(r) * g.dh * wq_ + size_t(s) * g.dw);
  k_rows_ = (size_t(g.K) + kBlockRows - 1) / kBlockRows * kBlockRows;
  const size_t kdim = size_t(g.C) * g.R * g.S;
  weights_.assign(k_rows_ * kdim, 0.f);
  std::copy_n(weights, size_t(g.K) * kdim, weights_.begin());  // [K][C][R][S] is already k = (c, r, s)
}

// Planes [c0, c1): zero padding around the input rows, widened to fp32.
void ImplicitConvF32::pack(const void* x, bool halves, float* planes, size_t c0, size_t c1) const {
  const size_t hw = size_t(g_.H) * g_.W;
  if (g_.pt == 0 && g_.pl == 0 && wq_ == g_.W && hq_ == g_.H) {
    // No padding (a 1x1 convolution): the plane is the input channel, then zeros to the block's end.
    for (size_t c = c0; c < c1; ++c) {
      float* dst = planes + c * plane_px_;
      if (halves) halves_to_floats(static_cast<const uint16_t*>(x) + c * hw, dst, hw);
      else std::memcpy(dst, static_cast<const float*>(x) + c * hw, hw * sizeof(float));
      std::fill(dst + hw, dst + plane_px_, 0.f);
    }
    return;
  }
  for (size_t c = c0; c < c1; ++c) {
    float* dst = planes + c * plane_px_;
    std::fill_n(dst, plane_px_, 0.f);
    for (uint32_t i = 0; i < g_.H; ++i) {
      const size_t row = i + g_.pt;
      if (row >= hq_) break;
      // Input column j lands at padded column j + pl; columns past the plane are never read.
      const size_t n = std::min<size_t>(g_.W, wq_ > g_.pl ? wq_ - g_.pl : 0);
      float* d = dst + row * wq_ + g_.pl;
      const size_t src = (c * g_.H + i) * g_.W;
      if (halves) halves_to_floats(static_cast<const uint16_t*>(x) + src, d, n);
      else std::memcpy(d, static_cast<const float*>(x) + src, n * sizeof(float));
    }
  }
}

void ImplicitConvF32::block(const float* planes, size_t row0, size_t pix0, const Epilogue& epilogue) const {
#ifdef SOFTDLA_X86
  const size_t taps = tap_offsets_.size(), kdim = size_t(g_.C) * taps;
  alignas(64) float sums[kBlockRows * kBlockPixels];
  const size_t rows = std::min<size_t>(kBlockRows, g_.K - row0), pixels = std::min(kBlockPixels, grid_ - pix0);
  for (size_t p = 0; p < pixels; p += kTilePixels)
    for (size_t r = 0; r < rows; r += kTileRows)  // rows past K: zero weights, sums nobody reads
      tile_taps_f32(weights_.data() + (row0 + r) * kdim, kdim, planes + pix0 + p, plane_px_, tap_offsets_.data(), taps,
                    g_.C, sums + r * kBlockPixels + p, kBlockPixels);
  emit_grid_runs(sums, kBlockPixels, rows, row0, pix0, pixels, wq_, g_.OW, epilogue);
#else
  (void)planes, (void)row0, (void)pix0, (void)epilogue;
#endif
}

void ImplicitConvF32::run(const void* x, bool halves, ThreadPool& pool, const Epilogue& epilogue) const {
  thread_local ScratchBuffer planes;  // the calling thread's: the workers get a pointer
  float* data = reinterpret_cast<float*>(planes.reserve(size_t(g_.C) * plane_px_ * sizeof(float)));
  pool.parallel_for(g_.C, [&](size_t b, size_t e) { pack(x, halves, data, b, e); }, ThreadPool::min_items(plane_px_));
  const size_t row_blocks = (g_.K + kBlockRows - 1) / kBlockRows, pixel_blocks = (grid_ + kBlockPixels - 1) / kBlockPixels;
  pool.parallel_for(row_blocks * pixel_blocks, [&](size_t b, size_t e) {
    for (size_t u = b; u < e; ++u) block(data, (u % row_blocks) * kBlockRows, (u / row_blocks) * kBlockPixels, epilogue);
  });
}

}  // namespace softdla::cpu
