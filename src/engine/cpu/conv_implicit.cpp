#include "conv_implicit.h"

#include <algorithm>
#include <cstring>

#include "x86_simd.h"

namespace softdla::cpu {
namespace {

constexpr size_t kRows = 8, kPixels = 32;          // the register tile
constexpr size_t kBlockRows = 32, kBlockPixels = 64;  // one work unit: 4 x 2 register tiles

#ifdef SOFTDLA_X86
#define SOFTDLA_ROWS8(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)

// 8 output channels x 32 grid pixels over every tap and channel quad; a[r] points at row r's
// [taps][cq] quads, b at the packed input of the tile's first pixel in phase 0 (quad rows qstride bytes
// apart); offsets[t] is the byte offset of tap t's input from there.
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void tile_taps(const int32_t* const* a, const uint8_t* b,
                                                                     size_t qstride, const size_t* offsets,
                                                                     size_t taps, size_t cq, int32_t (*out)[kPixels]) {
#define DECLARE(r) __m512i c##r##0 = _mm512_setzero_si512(), c##r##1 = c##r##0; const int32_t* a##r = a[r];
  SOFTDLA_ROWS8(DECLARE)
#undef DECLARE
  for (size_t t = 0; t < taps; ++t) {
    const uint8_t* bt = b + offsets[t];
    const size_t base = t * cq;
    for (size_t q = 0; q < cq; ++q) {
      const uint8_t* bq = bt + q * qstride;
      const __m512i x0 = _mm512_loadu_si512(bq), x1 = _mm512_loadu_si512(bq + 64);
      const size_t i = base + q;
#define STEP(r)                                          \
  {                                                      \
    const __m512i w = _mm512_set1_epi32(a##r[i]);        \
    c##r##0 = _mm512_dpbusd_epi32(c##r##0, x0, w);       \
    c##r##1 = _mm512_dpbusd_epi32(c##r##1, x1, w);       \
  }
      SOFTDLA_ROWS8(STEP)
#undef STEP
    }
  }
#define STORE(r) _mm512_storeu_si512(out[r], c##r##0), _mm512_storeu_si512(out[r] + 16, c##r##1);
  SOFTDLA_ROWS8(STORE)
#undef STORE
}
#endif

}  // namespace

bool ImplicitConvS8::applies(uint32_t groups, uint32_t sh, uint32_t sw, uint32_t R, uint32_t S) {
#ifdef SOFTDLA_X86
  return groups == 1 && (size_t(R) * S > 1 || sh > 1 || sw > 1);
#else
  (void)groups, (void)sh, (void)sw, (void)R, (void)S;
  return false;
#endif
}

ImplicitConvS8::ImplicitConvS8(const ImplicitGeometry& g, const int8_t* weights) : g_(g) {
  cq_ = (g.C + 3) / 4;
  wq_ = g.OW + size_t(g.S - 1) * g.dw / g.sw;
  hq_ = g.OH + size_t(g.R - 1) * g.dh / g.sh;
  phases_ = size_t(g.sh) * g.sw;
  grid_ = size_t(g.OH) * wq_;
  // The last tile reads up to a block past the grid, shifted by the farthest tap.
  const size_t reach = size_t(g.R - 1) * g.dh / g.sh * wq_ + size_t(g.S - 1) * g.dw / g.sw;
  plane_px_ = (grid_ + kBlockPixels - 1) / kBlockPixels * kBlockPixels + reach;
  const size_t taps = size_t(g.R) * g.S;
  for (uint32_t r = 0; r < g.R; ++r)
    for (uint32_t s = 0; s < g.S; ++s) {
      const size_t phase = (size_t(r) * g.dh % g.sh) * g.sw + size_t(s) * g.dw % g.sw;
      const size_t pixel = size_t(r) * g.dh / g.sh * wq_ + size_t(s) * g.dw / g.sw;
      tap_offsets_.push_back((phase * cq_ * plane_px_ + pixel) * 4);
    }
  taps_quads_.assign((size_t(g.K) + kBlockRows) * taps * cq_, 0);
  offset_sums_.assign(g.K, 0);
  for (uint32_t k = 0; k < g.K; ++k) {
    auto* row = reinterpret_cast<int8_t*>(taps_quads_.data() + size_t(k) * taps * cq_);
    int32_t sum = 0;
    for (uint32_t c = 0; c < g.C; ++c)
      for (size_t t = 0; t < taps; ++t) {
        const int8_t v = weights[(size_t(k) * g.C + c) * taps + t];
        row[(t * cq_ + c / 4) * 4 + c % 4] = v;
        sum += v;
      }
    offset_sums_[k] = 128 * sum;
  }
}

// Quad rows [u0, u1) of the packed input, u = phase * cq + quad.
void ImplicitConvS8::pack(const int8_t* x, uint8_t* packed, size_t u0, size_t u1) const {
  const size_t qstride = plane_px_ * 4;
  for (size_t u = u0; u < u1; ++u) {
    const size_t phase = u / cq_, q = u % cq_, pa = phase / g_.sw, pb = phase % g_.sw;
    uint8_t* dst = packed + u * qstride;
    std::memset(dst, 0x80, qstride);  // x = 0 is byte 0x80: padding and channels past C
    // Phase row a is padded row pa + a sh, input row pa + a sh - pt; likewise for columns.
    for (size_t a = 0; a < hq_; ++a) {
      const int64_t i = int64_t(pa + a * g_.sh) - g_.pt;
      if (i < 0 || i >= g_.H) continue;
      const int64_t first = int64_t(g_.pl) - int64_t(pb);  // column b reads input column pb + b sw - pl
      const size_t b0 = first <= 0 ? 0 : size_t((first + g_.sw - 1) / g_.sw);
      for (uint32_t c4 = 0; c4 < 4 && 4 * q + c4 < g_.C; ++c4) {
        const int8_t* src = x + (size_t(4 * q + c4) * g_.H + size_t(i)) * g_.W;
        uint8_t* d = dst + a * wq_ * 4 + c4;
        for (size_t b = b0; b < wq_; ++b) {
          const size_t j = pb + b * g_.sw - g_.pl;
          if (j >= g_.W) break;
          d[b * 4] = uint8_t(src[j]) ^ 0x80u;
        }
      }
    }
  }
}

void ImplicitConvS8::block(const uint8_t* packed, size_t row0, size_t pix0, const Epilogue& epilogue) const {
#ifdef SOFTDLA_X86
  const size_t taps = tap_offsets_.size(), row_quads = taps * cq_;
  alignas(64) int32_t tile[kRows][kPixels];
  thread_local std::vector<int32_t> sums;
  sums.resize(kBlockRows * kBlockPixels);
  const size_t rows = std::min<size_t>(kBlockRows, g_.K - row0), pixels = std::min(kBlockPixels, grid_ - pix0);
  for (size_t p = 0; p < pixels; p += kPixels)
    for (size_t r = 0; r < rows; r += kRows) {
      const int32_t* a[kRows];
      for (size_t i = 0; i < kRows; ++i) a[i] = taps_quads_.data() + (row0 + r + i) * row_quads;  // zero rows past K
      tile_taps(a, packed + (pix0 + p) * 4, plane_px_ * 4, tap_offsets_.data(), taps, cq_, tile);
      for (size_t i = 0; i < kRows && r + i < rows; ++i)
        for (size_t j = 0; j < kPixels; ++j) sums[(r + i) * kBlockPixels + p + j] = tile[i][j] - offset_sums_[row0 + r + i];
    }
  // Grid pixels to output rows: each grid row's first OW pixels are outputs.
  for (size_t r = 0; r < rows; ++r) {
    const int32_t* s = sums.data() + r * kBlockPixels;
    for (size_t p = 0; p < pixels;) {
      const size_t gp = pix0 + p, oh = gp / wq_, ow = gp % wq_;
      const size_t run = std::min(pixels - p, wq_ - ow);
      if (ow < g_.OW) epilogue(uint32_t(row0 + r), oh * g_.OW + ow, s + p, std::min<size_t>(run, g_.OW - ow));
      p += run;
    }
  }
#else
  (void)packed, (void)row0, (void)pix0, (void)epilogue;
#endif
}

void ImplicitConvS8::run(const int8_t* x, ThreadPool& pool, const Epilogue& epilogue) const {
  thread_local std::vector<uint8_t> packed;  // the calling thread's: the workers get a pointer
  packed.resize(phases_ * cq_ * plane_px_ * 4);
  uint8_t* data = packed.data();
  pool.parallel_for(phases_ * cq_, [&](size_t b, size_t e) { pack(x, data, b, e); }, ThreadPool::min_items(plane_px_ * 4));
  const size_t row_blocks = (g_.K + kBlockRows - 1) / kBlockRows, pixel_blocks = (grid_ + kBlockPixels - 1) / kBlockPixels;
  pool.parallel_for(row_blocks * pixel_blocks, [&](size_t b, size_t e) {
    for (size_t u = b; u < e; ++u) block(data, (u % row_blocks) * kBlockRows, (u / row_blocks) * kBlockPixels, epilogue);
  });
}

}  // namespace softdla::cpu
