#include "conv_implicit.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <type_traits>

#include "amx_tiles.h"
#include "cpu_isa.h"
#include "gemm_lanes_s8.h"
#include "gemm_vnni.h"
#include "implicit_grid.h"
#include "int8_requant_x86.h"
#include "panel_stream.h"
#include "scratch_buffer.h"
#include "x86_simd.h"

namespace softdla::cpu {
namespace {

// Register tiles: 8 rows x 32 pixels (AVX-512 VNNI), 6 rows x 16 pixels (AVX2). One work unit is 24 rows
// x 64 pixels, whole tiles of either.
constexpr size_t kTileCols = 32;  // the tile buffer's row length (the wider tile)
constexpr size_t kBlockRows = 24, kBlockPixels = 64;

// Whether the lane tiles take a convolution on the AVX-512 VNNI path: measured at least as fast as the
// grid's 8 x 32 tiles on ResNet's 3 x 3 layers at every size (Zen 4, one thread: 56 x 56 1.00-1.03,
// 28 x 28 1.08-1.15, 14 x 14 1.16, 7 x 7 1.3 times the speed), the small grids because the grid computes
// outputs it drops (64 grid pixels for 49 outputs at 7 x 7, 224 for 196 at 14 x 14). Below 16 output
// channels most of each lane vector would be padding.
bool lanes_pay(const ImplicitGeometry& g) { return g.K >= 16; }

#ifdef SOFTDLA_X86
#define SOFTDLA_ROWS8(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)

// 8 output channels x 32 grid pixels over every tap and channel quad; a[r] points at row r's
// [taps][cq] quads, b at the packed input of the tile's first pixel in phase 0 (quad rows qstride bytes
// apart); offsets[t] is the byte offset of tap t's input from there. Row r's sums start from init[r]
// (minus the offset's weight sum, so they leave exact) and go to out + r * ld.
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void tile_taps(const int32_t* const* a, const uint8_t* b,
                                                                     size_t qstride, const size_t* offsets,
                                                                     size_t taps, size_t cq, const int32_t* init,
                                                                     int32_t* out, size_t ld) {
#define DECLARE(r) __m512i c##r##0 = _mm512_set1_epi32(init[r]), c##r##1 = c##r##0; const int32_t* a##r = a[r];
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
#define STORE(r) _mm512_storeu_si512(out + r * ld, c##r##0), _mm512_storeu_si512(out + r * ld + 16, c##r##1);
  SOFTDLA_ROWS8(STORE)
#undef STORE
}

#define SOFTDLA_ROWS6(X) X(0) X(1) X(2) X(3) X(4) X(5)

// The int16-pair form on AVX2: 6 output channels x 16 grid pixels; each 4-byte slot holds two channels
// as int16 (b) and two weights as int16 (a), and vpmaddwd sums the two products exactly into int32.
__attribute__((target("avx2"))) void tile_taps_avx2(const int32_t* const* a, const uint8_t* b, size_t qstride,
                                                    const size_t* offsets, size_t taps, size_t cq, const int32_t* init,
                                                    int32_t* out, size_t ld) {
#define DECLARE(r) __m256i c##r##0 = _mm256_set1_epi32(init[r]), c##r##1 = c##r##0; const int32_t* a##r = a[r];
  SOFTDLA_ROWS6(DECLARE)
#undef DECLARE
  for (size_t t = 0; t < taps; ++t) {
    const uint8_t* bt = b + offsets[t];
    const size_t base = t * cq;
    for (size_t q = 0; q < cq; ++q) {
      const uint8_t* bq = bt + q * qstride;
      const __m256i x0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bq));
      const __m256i x1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bq + 32));
      const size_t i = base + q;
#define STEP(r)                                                                 \
  {                                                                             \
    const __m256i w = _mm256_set1_epi32(a##r[i]);                               \
    c##r##0 = _mm256_add_epi32(c##r##0, _mm256_madd_epi16(x0, w));              \
    c##r##1 = _mm256_add_epi32(c##r##1, _mm256_madd_epi16(x1, w));              \
  }
      SOFTDLA_ROWS6(STEP)
#undef STEP
    }
  }
#define STORE(r)                                                                \
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + r * ld), c##r##0),       \
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + r * ld + 8), c##r##1);
  SOFTDLA_ROWS6(STORE)
#undef STORE
}

// AMX (the tiles configured by the caller's TileScope): C tiles 0-3 accumulate 32 output channels x 32 grid pixels (int32), tiles 4-5 hold A (the
// weights of rows 0-15 and 16-31: 16 rows x 16 quads, signed), 6-7 B (16 quad rows of the packed input
// x 16 pixels: 64 contiguous bytes each, quad rows qstride apart, unsigned). Per (block of 16 quads, tap),
// four tdpbsud; taps inside quad blocks, so the planes' bytes a block reads stay in L1 across its taps.
__attribute__((target("amx-tile,amx-int8"))) void unit_amx(const int32_t* a, const uint8_t* b, size_t qstride,
                                                            const size_t* offsets, size_t taps, size_t quad_blocks,
                                                            int32_t (*out)[kTileCols]) {
  zero_block_tiles();
  constexpr size_t kTileWords = 16 * 16;
  for (size_t qb = 0; qb < quad_blocks; ++qb) {
    const uint8_t* bq = b + qb * 16 * qstride;
    for (size_t t = 0; t < taps; ++t, a += 2 * kTileWords) {
      // The weights stream in order, from memory where a layer's do not stay in cache: fetched
      // kWeightsAhead (quad block, tap) steps ahead.
      constexpr size_t kWeightsAhead = 4;
      for (size_t line = 0; line < 2 * kTileWords; line += 16)
        _mm_prefetch(reinterpret_cast<const char*>(a + kWeightsAhead * 2 * kTileWords + line), _MM_HINT_T0);
      _tile_loadd(4, a, 64);
      _tile_loadd(5, a + kTileWords, 64);
      _tile_loadd(6, bq + offsets[t], qstride);
      _tile_loadd(7, bq + offsets[t] + 64, qstride);
      SOFTDLA_TILE_BLOCK_PRODUCTS(_tile_dpbsud);
    }
  }
  store_block_tiles(out, kTileCols * sizeof(int32_t));
}
#endif

}  // namespace

StridePhases stride_phases(const ImplicitGeometry& g, size_t wq) {
  StridePhases sp;
  for (uint32_t r = 0; r < g.R; ++r)
    for (uint32_t s = 0; s < g.S; ++s) {
      const uint32_t phase = (r * g.dh % g.sh) * g.sw + s * g.dw % g.sw;
      const auto found = std::find(sp.phases.begin(), sp.phases.end(), phase);
      sp.slot.push_back(size_t(found - sp.phases.begin()));
      if (found == sp.phases.end()) sp.phases.push_back(phase);
      sp.offset.push_back(size_t(r) * g.dh / g.sh * wq + size_t(s) * g.dw / g.sw);
    }
  return sp;
}

PhaseColumns phase_columns(uint32_t W, uint32_t pl, uint32_t sw, size_t wq, size_t pb) {
  const int64_t first = int64_t(pl) - int64_t(pb);  // b sw >= first
  const int64_t past = int64_t(W) + pl - int64_t(pb);  // b sw < past
  PhaseColumns c;
  c.first = first <= 0 ? 0 : size_t((first + sw - 1) / sw);
  c.past = past <= 0 ? 0 : std::min(wq, size_t((past + sw - 1) / sw));
  return c;
}

bool ImplicitConvS8::applies(uint32_t groups, uint32_t sh, uint32_t sw, uint32_t R, uint32_t S) {
#ifdef SOFTDLA_X86
  return groups == 1 && (size_t(R) * S > 1 || sh > 1 || sw > 1);
#else
  (void)groups, (void)sh, (void)sw, (void)R, (void)S;
  return false;
#endif
}

ImplicitConvS8::ImplicitConvS8(const ImplicitGeometry& g, const int8_t* weights, bool pairs) : g_(g), pairs_(pairs) {
  per_slot_ = pairs ? 2 : 4;
  cq_ = (g.C + per_slot_ - 1) / per_slot_;
  // AMX tiles take 16 quads (64 channels) a step: with fewer than 32 channels most of each step would
  // multiply padding, and vpdpbusd measured faster.
  amx_ = !pairs && g.C >= 32 && active_isa() == Isa::kAmx;
  if (amx_) cq_ = (cq_ + kAmxQuads - 1) / kAmxQuads * kAmxQuads;  // whole tiles: quads past C are zero
  wq_ = g.OW + size_t(g.S - 1) * g.dw / g.sw;
  hq_ = g.OH + size_t(g.R - 1) * g.dh / g.sh;
  grid_ = size_t(g.OH) * wq_;
  // The last tile reads up to a block past the grid, shifted by the farthest tap.
  const size_t reach = size_t(g.R - 1) * g.dh / g.sh * wq_ + size_t(g.S - 1) * g.dw / g.sw;
  plane_px_ = (grid_ + kBlockPixels - 1) / kBlockPixels * kBlockPixels + reach;
  const size_t taps = size_t(g.R) * g.S;
  // Only the phases some tap reads are packed (a 1x1 stride-2 convolution reads one of four).
  StridePhases sp = stride_phases(g, wq_);
  used_phases_ = std::move(sp.phases);
  for (size_t t = 0; t < taps; ++t) tap_offsets_.push_back((sp.slot[t] * cq_ * plane_px_ + sp.offset[t]) * 4);
  if (!amx_) taps_quads_.assign((size_t(g.K) + kBlockRows) * taps * cq_, 0);
  offset_sums_.assign(g.K, 0);
  for (uint32_t k = 0; k < g.K; ++k) {
    int32_t* row = amx_ ? nullptr : taps_quads_.data() + size_t(k) * taps * cq_;  // AMX: its own A tiles
    int32_t sum = 0;
    for (uint32_t c = 0; c < g.C; ++c)
      for (size_t t = 0; t < taps; ++t) {
        const int8_t v = weights[(size_t(k) * g.C + c) * taps + t];
        sum += v;
        if (amx_) continue;
        const size_t slot = t * cq_ + c / per_slot_, lane = c % per_slot_;
        if (pairs) reinterpret_cast<int16_t*>(row + slot)[lane] = v;
        else reinterpret_cast<int8_t*>(row + slot)[lane] = v;
      }
    offset_sums_[k] = pairs ? 0 : 128 * sum;  // only the unsigned quads carry the +128 offset
  }
  zero_row_.assign(size_t(g.W) + 64, 0);  // vector loads reach a little past a run
  lanes_ = !pairs && !amx_ && lanes_pay(g);
  if (lanes_) {
    const size_t kq = taps * cq_, B = lanes_s8::kBlockRows;
    lane_blocks_ = lanes_s8::even_blocks(g.K);
    lanes_w_.assign((lane_blocks_.size() - 1) * B * kq, 0);
    for (size_t j = 0; j + 1 < lane_blocks_.size(); ++j)
      for (size_t k = lane_blocks_[j]; k < lane_blocks_[j + 1]; ++k)
        for (size_t i = 0; i < kq; ++i) lanes_w_[(j * kq + i) * B + k - lane_blocks_[j]] = taps_quads_[k * kq + i];
    for (size_t t = 0; t < taps; ++t)
      for (size_t q = 0; q < cq_; ++q) k_off_.push_back(tap_offsets_[t] + q * plane_px_ * 4);
    for (size_t oh = 0; oh < g.OH; ++oh)
      for (size_t ow = 0; ow < g.OW; ++ow) pixel_off_.push_back((oh * wq_ + ow) * 4);
  }
  offset_inits_.assign(size_t(g.K) + kBlockRows, 0);
  for (uint32_t k = 0; k < g.K; ++k) offset_inits_[k] = -offset_sums_[k];
  if (amx_) pack_amx_weights(weights);
}

// The A tiles: per block of 32 output channels, per block of 16 quads, per tap, the rows 0-15 then
// 16-31 of the block, each 16 rows x 16 quads (zero past K and past C).
void ImplicitConvS8::pack_amx_weights(const int8_t* weights) {
  const size_t taps = tap_offsets_.size(), quad_blocks = cq_ / kAmxQuads, row_blocks = (g_.K + 31) / 32;
  amx_a_.assign(row_blocks * quad_blocks * taps * 2 * 256, 0);
  for (size_t rb = 0; rb < row_blocks; ++rb)
    for (size_t qb = 0; qb < quad_blocks; ++qb)
      for (size_t t = 0; t < taps; ++t) {
        auto* tile = reinterpret_cast<int8_t*>(amx_a_.data() + ((rb * quad_blocks + qb) * taps + t) * 2 * 256);
        for (size_t i = 0; i < 32; ++i)
          for (size_t j = 0; j < 64; ++j) {
            const size_t k = rb * 32 + i, c = qb * 64 + j;
            if (k < g_.K && c < g_.C) tile[i * 64 + j] = weights[(k * g_.C + c) * taps + t];
          }
      }
}

// Slot rows [u0, u1) of the packed input, u = (used phase) * cq + slot: quads of x + 128 as unsigned
// bytes, or pairs of int16.
void ImplicitConvS8::pack(const int8_t* x, uint8_t* packed, size_t u0, size_t u1) const {
  const size_t qstride = plane_px_ * 4;
  for (size_t u = u0; u < u1; ++u) {
    const size_t phase = used_phases_[u / cq_], q = u % cq_, pa = phase / g_.sw, pb = phase % g_.sw;
    uint8_t* dst = packed + u * qstride;
    // Zero in each form (padding, and channels past C): byte 0x80 for quads, 0 for int16 pairs.
    std::memset(dst, pairs_ ? 0 : 0x80, qstride);
    const PhaseColumns cols = phase_columns(g_.W, g_.pl, g_.sw, wq_, pb);
    const size_t b0 = cols.first, b1 = cols.past;
    if (b0 >= b1 || per_slot_ * q >= g_.C) continue;  // quads past C (AMX's whole tiles) keep the zero code
    const uint32_t lanes = std::min<uint32_t>(per_slot_, g_.C - per_slot_ * uint32_t(q));
    // Phase row a is padded row pa + a sh, input row pa + a sh - pt.
    for (size_t a = 0; a < hq_; ++a) {
      const int64_t i = int64_t(pa + a * g_.sh) - g_.pt;
      if (i < 0 || i >= g_.H) continue;
      // Lanes past C read a row of zeros (the zero code either way).
      const int8_t* src[4] = {zero_row_.data(), zero_row_.data(), zero_row_.data(), zero_row_.data()};
      for (uint32_t lane = 0; lane < lanes; ++lane)
        src[lane] = x + (size_t(per_slot_ * q + lane) * g_.H + size_t(i)) * g_.W + (pb + b0 * g_.sw - g_.pl);
      uint8_t* d = dst + (a * wq_ + b0) * 4;
      const size_t n = b1 - b0;
      const size_t done = interleave_run(src, d, n);
      for (size_t b = done; b < n; ++b)
        for (uint32_t lane = 0; lane < lanes; ++lane) {
          const int8_t v = src[lane][b * g_.sw];
          if (pairs_) reinterpret_cast<int16_t*>(d + b * 4)[lane] = v;
          else d[b * 4 + lane] = uint8_t(v) ^ 0x80u;
        }
    }
  }
}

#ifdef SOFTDLA_X86
// The last n - b (1 to 16) pixels of four channel rows (src[lane][p * sw]) as offset quads at d + b * 4,
// read and written under byte masks.
static __attribute__((target("avx512f,avx512bw,avx512vl"))) void quad_tail_avx512(const int8_t* const* src, size_t b,
                                                                           size_t n, size_t sw, uint8_t* d) {
  const size_t left = n - b, bytes = (left - 1) * sw + 1;  // of each row, from column b
  const __mmask32 in = __mmask32((uint64_t(1) << bytes) - 1);
  const __m128i even = _mm_set1_epi16(0x00ff), flip = _mm_set1_epi8(char(0x80));
  __m128i v[4];
  for (int lane = 0; lane < 4; ++lane) {
    const __m256i row = _mm256_maskz_loadu_epi8(in, src[lane] + b * sw);
    const __m128i lo = _mm256_castsi256_si128(row), hi = _mm256_extracti128_si256(row, 1);
    v[lane] = sw == 1 ? lo : _mm_packus_epi16(_mm_and_si128(lo, even), _mm_and_si128(hi, even));
  }
  const __m128i ab_lo = _mm_unpacklo_epi8(v[0], v[1]), ab_hi = _mm_unpackhi_epi8(v[0], v[1]);
  const __m128i cd_lo = _mm_unpacklo_epi8(v[2], v[3]), cd_hi = _mm_unpackhi_epi8(v[2], v[3]);
  const __m512i quads = _mm512_inserti64x4(
      _mm512_castsi256_si512(_mm256_set_m128i(_mm_unpackhi_epi16(ab_lo, cd_lo), _mm_unpacklo_epi16(ab_lo, cd_lo))),
      _mm256_set_m128i(_mm_unpackhi_epi16(ab_hi, cd_hi), _mm_unpacklo_epi16(ab_hi, cd_hi)), 1);
  const __mmask64 out = left == 16 ? ~__mmask64(0) : (__mmask64(1) << (4 * left)) - 1;
  _mm512_mask_storeu_epi8(d + b * 4, out, _mm512_xor_si512(quads, _mm512_broadcast_i32x4(flip)));
}
#endif

// Interleaves whole 16-pixel runs of the slot's channel rows (src[lane][b * sw]) into d's 4-byte slots
// with SSE2 (stride 1 or 2; reads stay inside each row's n * sw bytes), and returns the pixels done.
size_t ImplicitConvS8::interleave_run(const int8_t* const* src, uint8_t* d, size_t n) const {
#ifdef SOFTDLA_X86
  if (g_.sw > 2) return 0;
  const __m128i even = _mm_set1_epi16(0x00ff), flip = _mm_set1_epi8(char(0x80));
  // 16 values of row p: the run's next bytes, or its even bytes for stride 2.
  auto load = [&](const int8_t* p) {
    if (g_.sw == 1) return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i lo = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    const __m128i hi = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16));
    return _mm_packus_epi16(_mm_and_si128(lo, even), _mm_and_si128(hi, even));
  };
  // Sixteen pixels from column b of each lane into out[0..3] (64 bytes).
  auto sixteen = [&](const int8_t* const* rows, size_t b, __m128i* out) {
    if (pairs_) {
      // Sign-extended int16 lanes: channel 0 in the low half of each slot, channel 1 in the high.
      const __m128i v0 = load(rows[0] + b * g_.sw), v1 = load(rows[1] + b * g_.sw);
      const __m128i c0lo = _mm_srai_epi16(_mm_unpacklo_epi8(v0, v0), 8), c0hi = _mm_srai_epi16(_mm_unpackhi_epi8(v0, v0), 8);
      const __m128i c1lo = _mm_srai_epi16(_mm_unpacklo_epi8(v1, v1), 8), c1hi = _mm_srai_epi16(_mm_unpackhi_epi8(v1, v1), 8);
      _mm_storeu_si128(out + 0, _mm_unpacklo_epi16(c0lo, c1lo));
      _mm_storeu_si128(out + 1, _mm_unpackhi_epi16(c0lo, c1lo));
      _mm_storeu_si128(out + 2, _mm_unpacklo_epi16(c0hi, c1hi));
      _mm_storeu_si128(out + 3, _mm_unpackhi_epi16(c0hi, c1hi));
    } else {
      const __m128i v0 = load(rows[0] + b * g_.sw), v1 = load(rows[1] + b * g_.sw);
      const __m128i v2 = load(rows[2] + b * g_.sw), v3 = load(rows[3] + b * g_.sw);
      const __m128i ab_lo = _mm_unpacklo_epi8(v0, v1), ab_hi = _mm_unpackhi_epi8(v0, v1);
      const __m128i cd_lo = _mm_unpacklo_epi8(v2, v3), cd_hi = _mm_unpackhi_epi8(v2, v3);
      _mm_storeu_si128(out + 0, _mm_xor_si128(_mm_unpacklo_epi16(ab_lo, cd_lo), flip));
      _mm_storeu_si128(out + 1, _mm_xor_si128(_mm_unpackhi_epi16(ab_lo, cd_lo), flip));
      _mm_storeu_si128(out + 2, _mm_xor_si128(_mm_unpacklo_epi16(ab_hi, cd_hi), flip));
      _mm_storeu_si128(out + 3, _mm_xor_si128(_mm_unpackhi_epi16(ab_hi, cd_hi), flip));
    }
  };
  size_t b = 0;
  // A stride-2 load reads 32 bytes, one past its 16th value: the run's last byte is (n - 1) sw.
  for (; b + 15 + g_.sw <= n; b += 16) sixteen(src, b, reinterpret_cast<__m128i*>(d + b * 4));
  if (b < n && !pairs_) {
    // The quads' tail under byte masks (AVX-512 machines): nothing read or written past the run.
    quad_tail_avx512(src, b, n, g_.sw, d);
  } else if (b < n) {
    // The last pixels (all of a 7- or 14-wide row) through 32-byte staging copies of each lane's rest.
    alignas(16) int8_t rest[4][32] = {};
    const int8_t* rows[4];
    const size_t bytes = (n - b - 1) * g_.sw + 1;
    for (uint32_t lane = 0; lane < per_slot_; ++lane) {
      std::memcpy(rest[lane], src[lane] + b * g_.sw, bytes);
      rows[lane] = rest[lane];
    }
    alignas(16) __m128i out[4];
    sixteen(rows, 0, out);
    std::memcpy(d + b * 4, out, (n - b) * 4);
  }
  return n;
#else
  (void)src, (void)d, (void)n;
  return 0;
#endif
}

#ifdef SOFTDLA_X86
namespace {

// A block's output runs: grid pixels [p, p + count) of every row of the block are outputs hw0.. of
// their channel (one output row's columns, or the tail of one and the start of the next).
// The block's sums (rows of kBlockPixels int32, row r = channel row0 + r) requantized on whole grid
// vectors into an int8 grid row, then each run copied to its output under a byte mask; with a
// residual, the add's other input is first gathered run by run into the same grid positions.
template <bool kResidual>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void emit_block_s8(const int32_t* sums, size_t rows, size_t row0,
                                                                        size_t pixels, const GridRun* runs,
                                                                        size_t n_runs, const Int8Output& o,
                                                                        uint32_t image) {
  auto mask = [](size_t left) { return left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1); };
  // 16 bytes of slack: runs are moved in whole vectors. The grid's dropped columns are computed on
  // whatever `theirs` holds there (zeros) and never stored.
  alignas(64) int8_t theirs[kBlockPixels + 16] = {}, mine[kBlockPixels + 16];
  // Row r's int8 results into `mine`, with the residual add (`add`: a Residual512::with_form form).
  auto requantize_row = [&](size_t r, const Window512& win, const auto& add, auto conv_second)
                            __attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) {
    win.with_form([&](auto form) __attribute__((target("avx512f,avx512bw,avx512vl"))) {
      const int32_t* row_sums = sums + r * kBlockPixels;
      size_t j = 0;
      if (pixels == kBlockPixels) {
        if constexpr (kResidual)
          _mm512_store_si512(mine, requant_add_64<decltype(conv_second)::value>(form, add, row_sums, theirs));
        else
          _mm512_store_si512(mine, form.apply64(row_sums));
        j = pixels;
      }
      for (; j < pixels; j += 16) {
        if constexpr (kResidual) {
          _mm_store_si128(reinterpret_cast<__m128i*>(mine + j),
                          requant_add_16<decltype(conv_second)::value>(
                              form, add, _mm512_load_si512(row_sums + j),
                              _mm_load_si128(reinterpret_cast<const __m128i*>(theirs + j))));
        } else {
          _mm_store_si128(reinterpret_cast<__m128i*>(mine + j), form.apply(_mm512_load_si512(row_sums + j)));
        }
      }
    });
  };
  auto emit_rows = [&](const auto& add, auto conv_second) __attribute__((target("avx512f,avx512bw,avx512vl"))) {
    for (size_t r = 0; r < rows; ++r) {
      const size_t k = row0 + r, base = image * o.image_stride + k * o.ld;
      if constexpr (kResidual)
        for (size_t i = 0; i < n_runs; ++i)  // in grid order: each plain store's spill is overwritten next
          for (uint32_t j = 0; j < runs[i].count; j += 16)
            _mm_storeu_si128(reinterpret_cast<__m128i*>(theirs + runs[i].p + j),
                             _mm_maskz_loadu_epi8(mask(runs[i].count - j), o.other + base + runs[i].hw0 + j));
      requantize_row(r, Window512(o.windows[k]), add, conv_second);
      for (size_t i = 0; i < n_runs; ++i)
        for (uint32_t j = 0; j < runs[i].count; j += 16) {
          const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(mine + runs[i].p + j));
          int8_t* to = o.out + base + runs[i].hw0 + j;
          // Whole vectors plainly (masked byte stores are slow on AMD Zen), the run's tail under a mask.
          if (runs[i].count - j >= 16) _mm_storeu_si128(reinterpret_cast<__m128i*>(to), v);
          else _mm_mask_storeu_epi8(to, mask(runs[i].count - j), v);
        }
    }
  };
  if constexpr (kResidual) {
    Residual512(*o.residual).with_form(o.conv_second, emit_rows);
  } else {
    emit_rows(0, std::false_type{});
  }
}

}  // namespace
#endif

void ImplicitConvS8::block(const uint8_t* packed, uint32_t n, size_t row0, size_t pix0, const Epilogue& epilogue,
                           const Int8Output* direct) const {
#ifdef SOFTDLA_X86
  if (amx_) return block_amx(packed, n, row0, pix0, epilogue);
  const size_t taps = tap_offsets_.size(), row_quads = taps * cq_;
  const size_t tile_rows = pairs_ ? 6 : 8, tile_pixels = pairs_ ? 16 : 32;
  alignas(64) int32_t sums[kBlockRows * kBlockPixels];
  const size_t rows = std::min<size_t>(kBlockRows, g_.K - row0), pixels = std::min(kBlockPixels, grid_ - pix0);
  for (size_t p = 0; p < pixels; p += tile_pixels)
    for (size_t r = 0; r < rows; r += tile_rows) {
      const int32_t* a[8];
      for (size_t i = 0; i < tile_rows; ++i) a[i] = taps_quads_.data() + (row0 + r + i) * row_quads;  // zero rows past K
      const uint8_t* b = packed + (pix0 + p) * 4;
      // Rows past K (zero weights, and sums nobody reads) start from init's spare zeros.
      const int32_t* init = offset_inits_.data() + row0 + r;
      int32_t* out = sums + r * kBlockPixels + p;
      if (pairs_) tile_taps_avx2(a, b, plane_px_ * 4, tap_offsets_.data(), taps, cq_, init, out, kBlockPixels);
      else tile_taps(a, b, plane_px_ * 4, tap_offsets_.data(), taps, cq_, init, out, kBlockPixels);
    }
  if (direct && !pairs_) {
    GridRun runs[kBlockPixels];
    const size_t n_runs = grid_runs(pix0, pixels, wq_, g_.OW, runs);
    if (direct->residual) emit_block_s8<true>(sums, rows, row0, pixels, runs, n_runs, *direct, n);
    else emit_block_s8<false>(sums, rows, row0, pixels, runs, n_runs, *direct, n);
    return;
  }
  emit_grid_runs(sums, kBlockPixels, rows, row0, pix0, pixels, wq_, g_.OW,
                 [&](uint32_t k, size_t hw0, const int32_t* v, size_t count) { epilogue(n, k, hw0, v, count); });
#else
  (void)packed, (void)n, (void)row0, (void)pix0, (void)epilogue, (void)direct;
#endif
}

// One unit of 32 output channels x 32 grid pixels on AMX tiles.
void ImplicitConvS8::block_amx(const uint8_t* packed, uint32_t n, size_t row0, size_t pix0,
                               const Epilogue& epilogue) const {
#ifdef SOFTDLA_X86
  const size_t taps = tap_offsets_.size(), quad_blocks = cq_ / kAmxQuads;
  alignas(64) int32_t tile[32][kTileCols];
  unit_amx(amx_a_.data() + (row0 / 32) * quad_blocks * taps * 2 * 256, packed + pix0 * 4, plane_px_ * 4,
           tap_offsets_.data(), taps, quad_blocks, tile);
  const size_t rows = std::min<size_t>(32, g_.K - row0), pixels = std::min<size_t>(32, grid_ - pix0);
  for (size_t r = 0; r < rows; ++r)
    for (size_t j = 0; j < pixels; ++j) tile[r][j] -= offset_sums_[row0 + r];
  emit_grid_runs(&tile[0][0], kTileCols, rows, row0, pix0, pixels, wq_, g_.OW,
                 [&](uint32_t k, size_t hw0, const int32_t* v, size_t count) { epilogue(n, k, hw0, v, count); });
#else
  (void)packed, (void)n, (void)row0, (void)pix0, (void)epilogue;
#endif
}

void ImplicitConvS8::run_lanes(const uint8_t* packed, size_t image, const Int8Output& direct, size_t block,
                               size_t col0, size_t cols) const {
  const size_t row0 = lane_blocks_[block], rows = lane_blocks_[block + 1] - row0, kq = k_off_.size();
  Int8Output o = direct;
  o.windows += row0;
  o.out += image * o.image_stride + row0 * o.ld + col0;
  if (o.other) o.other += image * o.image_stride + row0 * o.ld + col0;
  gemm_lanes_s8_gather(lanes_w_.data() + block * lanes_s8::kBlockRows * kq, offset_sums_.data() + row0, packed,
                       pixel_off_.data() + col0, k_off_.data(), rows, cols, kq, o);
}

void ImplicitConvS8::run(const int8_t* x, size_t images, size_t image_stride, ThreadPool& pool,
                         const Epilogue& epilogue, const Int8Output* direct) const {
  if (!writes_int8()) direct = nullptr;
  thread_local ScratchBuffer packed;  // the calling thread's: the workers get a pointer
  const size_t slots = used_phases_.size() * cq_, image_bytes = slots * plane_px_ * 4;
  // The batch in image groups (implicit_grid.h; at batch 8 on ResNet-18/50 the same speed as packing the
  // batch whole, within this VM's noise, with a scratch that no longer grows with the batch).
  const size_t group = image_group(image_bytes, images);
  uint8_t* data = packed.reserve(group * image_bytes);
  const size_t unit_rows = amx_ ? 32 : kBlockRows, unit_pixels = amx_ ? 32 : kBlockPixels;
  const size_t row_blocks = (g_.K + unit_rows - 1) / unit_rows, pixel_blocks = (grid_ + unit_pixels - 1) / unit_pixels;
  for_each_image_group(
      pool, images, group, slots, ThreadPool::min_items(plane_px_ * 4),
      [&](size_t n, size_t slot, size_t u0, size_t u1) {
        pack(x + n * image_stride, data + slot * image_bytes, u0, u1);
      },
      [&](size_t n0, size_t count) {
        if (lanes_ && direct) {
          // Images outermost, then lane blocks (lane_blocks_: up to 48 output channels, of even sizes), then
          // each image's output pixels in parts: four units a thread at least (ResNet-50's last 3 x 3 layers
          // at batch 1 are 11 blocks of one 49-pixel image). The pool gives each thread a contiguous range of
          // units, as it gave the pack's: a thread then reads the images it packed from its own L2 instead
          // of half of each from the other core's (lane blocks outermost, sharing the weights instead, was
          // 3-6 % slower on ResNet-18 and -50 at batch 8 on two threads, even on the 7 x 7 layers whose
          // weights outgrow L2).
          const size_t blocks = lane_blocks_.size() - 1;
          const size_t want = (4 * pool.size() + blocks * count - 1) / (blocks * count);
          // Parts of up to about 512 pixels: a unit's packed input in L2.
          const size_t pixels = pixel_off_.size(), part = lane_unit_pixels(pixels, want, lanes_s8::kTileCols, 512);
          const size_t parts = (pixels + part - 1) / part, per_image = blocks * parts;
          pool.parallel_for(count * per_image, [&](size_t b, size_t e) {
            const PanelStreamScope stream_scope;
            for (size_t u = b; u < e; ++u) {
              const size_t image = u / per_image, block = u % per_image / parts, col0 = u % parts * part;
              // The weights this thread reads next, fetched into L2 by this unit's tiles (panel_stream.h):
              // the next block's (the next image's first after the last block).
              const size_t next = next_block_in_walk(image, block, count, blocks);
              const size_t block_words = lanes_s8::kBlockRows * k_off_.size();
              stream_panel_part(next < blocks ? lanes_w_.data() + next * block_words : nullptr,
                                block_words * sizeof(int32_t), u % parts, parts);
              run_lanes(data + image * image_bytes, n0 + image, *direct, block, col0, std::min(part, pixels - col0));
            }
          });
          return;
        }
        const size_t columns = count * pixel_blocks;  // the group's pixel blocks
        // Off AMX (AVX2's pairs, the grid tiles): pixel blocks, image by image, outermost as for the lane
        // tiles above, so a thread reads the images it packed (row blocks outermost was 3-6 % slower on
        // ResNet-18 and -50 at batch 8 on two threads, forced to AVX2). AMX keeps row blocks outermost, a
        // chunk's units sharing their weights (not measured the other way on an AMX machine yet).
        const bool images_outer = !amx_;
        pool.parallel_for(row_blocks * columns, [&](size_t b, size_t e) {
          std::optional<TileScope> tiles;  // AMX: configured once for the chunk's units
          if (amx_) tiles.emplace();
          for (size_t u = b; u < e; ++u) {
            const size_t column = images_outer ? u / row_blocks : u % columns;
            const size_t row_block = images_outer ? u % row_blocks : u / columns, n = column / pixel_blocks;
            block(data + n * image_bytes, uint32_t(n0 + n), row_block * unit_rows,
                  (column % pixel_blocks) * unit_pixels, epilogue, direct);
          }
        });
      });
}

}  // namespace softdla::cpu
