#include "conv_amx_f16.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "amx_tiles.h"
#include "cpu_isa.h"
#include "half_convert_avx512.h"
#include "implicit_grid.h"
#include "kernel_switch.h"
#include "log.h"
#include "numerics.h"
#include "transpose_avx512.h"
#include "x86_simd.h"

namespace softdla::cpu {
namespace {

constexpr size_t kTile = 16;                 // rows, channels and pixels of one tile
constexpr size_t kUnitRows = 2 * kTile;      // output channels of a work unit (two C tile rows)
constexpr size_t kUnitPixels = 2 * kTile;    // grid pixels of a work unit (two C tile columns)
constexpr size_t kTileDwords = kTile * kTile;  // one A or B tile: 16 rows of 16 bf16 pairs
constexpr size_t kBlockDwords = 2 * kTile * kUnitPixels;  // a blocked 1x1 input block: hi and lo pairs
constexpr size_t kSharedInputBytes = size_t(1) << 20;     // a 1x1 input packed whole up to this size
constexpr size_t kWeightsAhead = 4;  // (channel block, tap) steps the weight pairs are prefetched ahead
constexpr size_t kCachedBytes = size_t(1) << 20;          // what a core's L2 is taken to keep between units
// Packed 1x1 input blocks a work unit takes, at most (ResNet-50's 64 -> 256 at 56 x 56 with a cold output, one
// thread: one block 0.80-0.85 ms, 64 KB 0.75, 128-256 KB 0.62-0.73, 1 MB no better).
constexpr size_t kSpanBytes = size_t(256) << 10;
constexpr size_t kSpansPerThread = 8;                     // work units each thread gets at least
constexpr size_t kRowBlocksPerThread = 4;  // a small grid split by row blocks: at least this many a thread

// An fp32 holding an fp16 value split into bf16 parts: hi, its top 16 bits (sign, exponent and 7
// mantissa bits), and lo = x - hi (at most 3 significant bits: exact in bf16), each as the top 16 bits
// of an fp32. Infinities and NaN keep lo = 0 (x - hi would be NaN for an infinity).
inline uint32_t high_part(float x) { return num::float_to_bits(x) & 0xFFFF0000u; }
inline uint32_t low_part(float x) {
  const uint32_t bits = num::float_to_bits(x);
  if ((bits & 0x7F800000u) == 0x7F800000u) return 0;
  return num::float_to_bits(x - num::bits_to_float(bits & 0xFFFF0000u)) & 0xFFFF0000u;
}
// Two bf16 (as fp32 top halves) in one dword: a in the low half, b in the high half.
inline uint32_t bf16_pair(uint32_t a, uint32_t b) { return a >> 16 | b; }

// n halves as the pairs (hi, hi) and (lo, lo), a non-finite x as (x, 0) and (0, 0) (the AVX-512 form below).
[[maybe_unused]] void split_halves(const uint16_t* src, uint32_t* hi_dst, uint32_t* lo_dst, size_t n) {
  for (size_t j = 0; j < n; ++j) {
    // A NaN as the quiet NaN: one whose payload is only in the low mantissa bits would lose it to the
    // truncation and read as an infinity.
    const float h = num::half_to_float(src[j]), v = std::isnan(h) ? std::numeric_limits<float>::quiet_NaN() : h;
    hi_dst[j] = bf16_pair(high_part(v), std::isfinite(v) ? high_part(v) : 0u);
    lo_dst[j] = bf16_pair(low_part(v), low_part(v));
  }
}

#ifdef SOFTDLA_X86
// 16 fp16 values (fp32 lanes) as the pairs (hi, hi) and (lo, lo): the weights are the pairs (w_hi, w_lo),
// so the two parts' products add up to w * x_hi and w * x_lo.
struct SplitLanes {
  __m512i hi, lo;
};
__attribute__((target("avx512f,avx512bw,avx512vl,f16c"), always_inline)) inline SplitLanes split16_lanes(__m256i halves) {
  const __m512i top = _mm512_set1_epi32(int(0xFFFF0000u)), exp_mask = _mm512_set1_epi32(0x7F800000);
  __m512 x = _mm512_cvtph_ps(halves);
  // NaN as the quiet NaN (as split_halves): its top 16 bits must still read as a NaN.
  x = _mm512_mask_mov_ps(x, _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), _mm512_castsi512_ps(_mm512_set1_epi32(0x7fc00000)));
  const __m512i bits = _mm512_castps_si512(x), hi = _mm512_and_si512(bits, top);
  const __mmask16 finite = _mm512_cmpneq_epi32_mask(_mm512_and_si512(bits, exp_mask), exp_mask);
  const __m512i lo = _mm512_and_si512(
      _mm512_maskz_mov_epi32(finite, _mm512_castps_si512(_mm512_sub_ps(x, _mm512_castsi512_ps(hi)))), top);
  // A non-finite x as (x, 0): x * w_hi + 0 * w_lo (w_lo is often 0, and 0 * inf would be NaN).
  return {_mm512_or_si512(_mm512_srli_epi32(hi, 16), _mm512_maskz_mov_epi32(finite, hi)),
          _mm512_or_si512(_mm512_srli_epi32(lo, 16), lo)};
}

// 16 halves (the lanes under m) split as split16_lanes does, into hi_dst and lo_dst.
__attribute__((target("avx512f,avx512bw,avx512vl,f16c"), always_inline)) inline void split16_avx512(
    __m256i halves, __mmask16 m, uint32_t* hi_dst, uint32_t* lo_dst) {
  const SplitLanes v = split16_lanes(halves);
  _mm512_mask_storeu_epi32(hi_dst, m, v.hi);
  _mm512_mask_storeu_epi32(lo_dst, m, v.lo);
}

// n halves split as split16_avx512 does.
__attribute__((target("avx512f,avx512bw,avx512vl,f16c"))) void split_halves_avx512(const uint16_t* src, uint32_t* hi_dst,
                                                                                   uint32_t* lo_dst, size_t n) {
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    split16_avx512(_mm256_maskz_loadu_epi16(m, src + i), m, hi_dst + i, lo_dst + i);
  }
}

// The weight pairs stream from memory where a layer's do not stay in cache (the last stage holds 9 MB of
// them): each step fetches the step kWeightsAhead ahead of w (its two tiles), as they are read, in order.
__attribute__((always_inline)) inline void fetch_weights_ahead(const uint32_t* w) {
  for (size_t line = 0; line < 2 * kTileDwords; line += 16)
    _mm_prefetch(reinterpret_cast<const char*>(w + kWeightsAhead * 2 * kTileDwords + line), _MM_HINT_T0);
}

// One (channel block, tap) step of a unit: the two weight tiles (w, 64-byte rows), the activations' hi
// tiles (at hi and hi + second, rows `stride` bytes apart) and four products, then their lo tiles into
// the same registers and four more. kActivationsAsA: the activations are tiles 4-5 and the weights 6-7
// (pixel rows); otherwise the weights are A and the activations B (channel rows).
template <bool kActivationsAsA>
__attribute__((target("amx-tile,amx-bf16"), always_inline)) inline void hi_lo_step(const uint32_t* w,
                                                                                    const uint32_t* hi,
                                                                                    const uint32_t* lo,
                                                                                    size_t stride, size_t second) {
  fetch_weights_ahead(w);
  // _tile_loadd names its tile in the instruction's text: the tile numbers must be literals.
#define SOFTDLA_HI_LO_STEP(W0, W1, X0, X1)        \
  _tile_loadd(W0, w, 64);                         \
  _tile_loadd(W1, w + kTileDwords, 64);           \
  _tile_loadd(X0, hi, stride);                    \
  _tile_loadd(X1, hi + second, stride);           \
  SOFTDLA_TILE_BLOCK_PRODUCTS(_tile_dpbf16ps);    \
  _tile_loadd(X0, lo, stride);                    \
  _tile_loadd(X1, lo + second, stride);           \
  SOFTDLA_TILE_BLOCK_PRODUCTS(_tile_dpbf16ps)
  if constexpr (kActivationsAsA) {
    SOFTDLA_HI_LO_STEP(6, 7, 4, 5);
  } else {
    SOFTDLA_HI_LO_STEP(4, 5, 6, 7);
  }
#undef SOFTDLA_HI_LO_STEP
}

// Where a unit's activation tiles are: the hi tile of channel block cb and tap t at x + cb * block_step +
// offsets[t], its second tile `second` dwords further, 16 rows row_bytes apart; the lo tile lo_offset
// dwords after the hi one.
struct ActivationTiles {
  const uint32_t* x;
  size_t block_step, lo_offset, row_bytes, second;
};

// One work unit's sums (the tiles configured by the caller's TileScope) over (channel block, tap) steps
// (hi_lo_step), taps inside channel blocks, so the activations a block reads stay in L1 across its taps;
// the weights stream from L2 once per unit. C tiles 0-3 hold 32 x 32 sums, stored at `sums` (rows of 32).
//
// Two forms. The blocked one (kActivationsAsA false: a 1x1 convolution's packed pixel blocks, rows of
// channel pairs 128 bytes long) has the weights as A and the sums as [channel][pixel]. The planes' one
// (true: k x k convolutions, and 1x1 ones with stride or padding) has the pixels as the A tiles' rows: each
// packed pixel is one 64-byte row of its 16 channels' pairs, so every tile load is 16 consecutive pixels,
// 1 KB at a 64-byte boundary whatever the tap's shift, and the sums are [pixel][channel]. With channel
// rows there a tap's shift of one pixel moved each tile row by 4 bytes: every row of two taps in three
// straddled two cache lines, and the products ran at about 60 % of the rate they reach on aligned rows
// (docs/PERFORMANCE.md, twenty-eighth CPU session).
template <bool kActivationsAsA>
__attribute__((target("amx-tile,amx-bf16"))) void unit_tiles(const uint32_t* w, const ActivationTiles& act,
                                                              const size_t* offsets, size_t taps, size_t c_blocks,
                                                              float (*sums)[2 * kTile]) {
  zero_block_tiles();
  for (size_t cb = 0; cb < c_blocks; ++cb) {
    const uint32_t* xc = act.x + cb * act.block_step;
    for (size_t t = 0; t < taps; ++t, w += 2 * kTileDwords) {
      const uint32_t* hi = xc + offsets[t];
      hi_lo_step<kActivationsAsA>(w, hi, hi + act.lo_offset, act.row_bytes, act.second);
    }
  }
  store_block_tiles(sums, 2 * kTile * sizeof(float));
}

// sums_t[pixel][channel] into sums[channel][pixel] (32 x 32).
__attribute__((target("avx512f"))) void transpose_unit_sums(const float (*sums_t)[kUnitRows],
                                                            float (*sums)[kUnitPixels]) {
  for (size_t pb = 0; pb < kUnitPixels; pb += kTile)
    for (size_t kb = 0; kb < kUnitRows; kb += kTile) {
      __m512 r[16];
      for (size_t i = 0; i < kTile; ++i) r[i] = _mm512_load_ps(&sums_t[pb + i][kb]);
      transpose16(r);
      for (size_t i = 0; i < kTile; ++i) _mm512_store_ps(&sums[kb + i][pb], r[i]);
    }
}

// n pixels of one phase row of `channels` channels (channel c's at src + c * channel_step, every sw-th
// half) into pixel rows of 16 pairs: sixteen pixels at a time, split in channel lanes and transposed.
__attribute__((target("avx512f,avx512bw,avx512vl,f16c"))) void pack_row_avx512(const uint16_t* src, size_t sw,
                                                                               size_t channel_step, size_t channels,
                                                                               size_t n, uint32_t* hi_row,
                                                                               uint32_t* lo_row) {
  for (size_t j = 0; j < n; j += kTile) {
    const size_t values = std::min(kTile, n - j);
    const __mmask16 m = __mmask16((1u << values) - 1);
    __m512 hv[kTile], lv[kTile];
    for (size_t c = 0; c < kTile; ++c) {
      __m256i halves = _mm256_setzero_si256();
      if (c < channels) {
        const uint16_t* at = src + c * channel_step + j * sw;
        if (sw == 1) {
          halves = _mm256_maskz_loadu_epi16(m, at);
        } else if (sw == 2) {
          halves = even_halves_avx512(at, values);
        } else {
          alignas(32) uint16_t picked[kTile] = {};
          for (size_t v = 0; v < values; ++v) picked[v] = at[v * sw];
          halves = _mm256_load_si256(reinterpret_cast<const __m256i*>(picked));
        }
      }
      const SplitLanes parts = split16_lanes(halves);
      hv[c] = _mm512_castsi512_ps(parts.hi);
      lv[c] = _mm512_castsi512_ps(parts.lo);
    }
    transpose16(hv);
    transpose16(lv);
    for (size_t v = 0; v < values; ++v) {
      _mm512_store_ps(reinterpret_cast<float*>(hi_row + (j + v) * kTile), hv[v]);
      _mm512_store_ps(reinterpret_cast<float*>(lo_row + (j + v) * kTile), lv[v]);
    }
  }
}
#endif

}  // namespace

namespace {

// SOFTDLA_AMX_F16: auto (the measured rule below), all (every convolution the tiles can take: the tests
// use it to run odd shapes on them) or 0 (none).
enum class AmxF16Choice { kAuto, kAll, kNone };
AmxF16Choice amx_f16_choice() {
  static const auto choice = AmxF16Choice(kernel_switch("SOFTDLA_AMX_F16", {"auto", "all", "0"}));
  return choice;
}

}  // namespace

bool AmxConvF16::applies(uint32_t groups, uint32_t channels, uint32_t out_channels, uint32_t taps, bool plain_1x1,
                         bool winograd_alternative) {
  // Below 16 channels most of each 16-channel tile step would be padding: the FMA kernels stay faster
  // (an im2col form over the receptive fields measured no faster on ResNet's RGB first layer either).
  if (groups != 1 || channels < kTile || !cpu_has_amx_bf16() || active_isa() != Isa::kAmx) return false;
  switch (amx_f16_choice()) {
    case AmxF16Choice::kAll: return true;
    case AmxF16Choice::kNone: return false;
    case AmxF16Choice::kAuto: break;
  }
  // Each fp16 product costs the tiles four bf16 ones, and each output a tile store, the epilogue and
  // its input's split into hi/lo pairs (four dwords per fp16 value). Measured on a 2-core Xeon with
  // AMX (docs/PERFORMANCE.md, tenth CPU session), layer by layer against the AVX-512 FMA kernels: the
  // tiles lose on short reductions (1x1 with 16 to 160 channels: up to 2.3x slower) and win from 256
  // products per output (1x1 from 256 channels, k x k from 32 or so); against Winograd F(2x2, 3x3),
  // which needs 2.25x fewer products, they won only from 128 channels (64: 1.1-1.4x slower) until the
  // planes held 16 channels a pixel (twenty-eighth CPU session: aligned tile loads, the products 1.3x as
  // fast); now from 64 (ResNet's 64-channel 3x3 at 56 x 56: 0.76-0.79 ms against Winograd's 0.94-1.02). A plain 1x1
  // convolution splits each input value once for all its output channels (blocked layout, no planes).
  // Until its blocks sat on cache lines (twenty-eighth CPU session) the tiles won there only from 64
  // channels into 256 over large grids; since, every expansion into 128 channels or more gains at batch 1
  // (kPlain1x1MinOutChannels), and only the narrow projections stay on the FMA kernels.
  if (winograd_alternative) return channels >= 64;
  return size_t(channels) * taps >= 256 || (plain_1x1 && out_channels >= kPlain1x1MinOutChannels);
}

AmxConvF16::AmxConvF16(const ImplicitGeometry& g, const float* weights) : g_(g) {
  wq_ = g.OW + size_t(g.S - 1) * g.dw / g.sw;
  hq_ = g.OH + size_t(g.R - 1) * g.dh / g.sh;
  grid_ = size_t(g.OH) * wq_;
  const size_t reach = size_t(g.R - 1) * g.dh / g.sh * wq_ + size_t(g.S - 1) * g.dw / g.sw;
  plane_px_ = (grid_ + kUnitPixels - 1) / kUnitPixels * kUnitPixels + reach;
  c_blocks_ = (size_t(g.C) + kTile - 1) / kTile;
  row_blocks_ = (size_t(g.K) + kUnitRows - 1) / kUnitRows;
  // A 1x1 convolution that reads its planes as they are (no padding, stride 1) has no taps to share a
  // plane's rows: its input is packed in blocks instead, each unit's B tiles contiguous.
  blocked_ = g.R == 1 && g.S == 1 && g.sh == 1 && g.sw == 1 && g.pt == 0 && g.pl == 0 && g.OH == g.H && g.OW == g.W;
  // Tap (r, s) reads stride phase (r dh % sh, s dw % sw) at grid offset (r dh / sh) Wq + s dw / sw; only
  // the phases some tap reads are packed (a 1x1 stride-2 convolution reads one of four).
  phase_dwords_ = c_blocks_ * kTile * plane_px_;
  StridePhases sp = stride_phases(g, wq_);
  used_phases_ = std::move(sp.phases);
  // The planes hold 16 channel pairs a pixel (unit_amx_pixel_rows): a tap's shift moves whole pixels.
  for (size_t t = 0; t < sp.offset.size(); ++t) tap_offsets_.push_back(sp.slot[t] * phase_dwords_ + sp.offset[t] * kTile);
  const size_t taps = tap_offsets_.size();
  a_tiles_.assign(row_blocks_ * c_blocks_ * taps * 2 * kTileDwords, 0);
  for (size_t rb = 0; rb < row_blocks_; ++rb)
    for (size_t cb = 0; cb < c_blocks_; ++cb)
      for (size_t t = 0; t < taps; ++t) {
        uint32_t* step = a_tiles_.data() + ((rb * c_blocks_ + cb) * taps + t) * 2 * kTileDwords;
        for (size_t half = 0; half < 2; ++half)
          for (size_t i = 0; i < kTile; ++i)
            for (size_t j = 0; j < kTile; ++j) {
              // Blocked: rows are output channels (A tiles); planes: rows are input channels (B tiles).
              const size_t k = rb * kUnitRows + half * kTile + (blocked_ ? i : j), c = cb * kTile + (blocked_ ? j : i);
              if (k >= g.K || c >= g.C) continue;
              const float w = weights[(k * g.C + c) * taps + t];
              step[half * kTileDwords + i * kTile + j] = bf16_pair(high_part(w), low_part(w));
            }
      }
}

// A 1x1 convolution's input for the pixel block pb (32 pixels), every channel: per channel block of 16,
// the hi pairs (16 channel rows of 32 pixels) then the lo pairs, kBlockDwords in all.
void AmxConvF16::pack_pixel_block(const uint16_t* x, uint32_t* block, size_t pb) const {
  const size_t p0 = pb * kUnitPixels, n = std::min(kUnitPixels, grid_ - p0);
#ifdef SOFTDLA_X86
  // The block's own lines, kChannelsAhead channels before they are split: one line from each of C planes
  // is too many streams for the hardware prefetchers, and a batch's input is beyond L2 (ResNet-50's stage-1
  // 256 -> 64 layer at batch 8 waited on these loads for half its time).
  static constexpr size_t kChannelsAhead = 16;
  const auto fetch = [&](size_t c) { prefetch_run_ends(x + c * grid_ + p0, n); };
  for (size_t c = 0; c < std::min<size_t>(kChannelsAhead, g_.C); ++c) fetch(c);
#endif
  for (size_t c = 0; c < c_blocks_ * kTile; ++c) {
    uint32_t* hi = block + (c / kTile) * kBlockDwords + (c % kTile) * kUnitPixels;
    uint32_t* lo = hi + kBlockDwords / 2;
    const size_t m = c < g_.C ? n : 0;
    std::fill(hi + m, hi + kUnitPixels, 0u);
    std::fill(lo + m, lo + kUnitPixels, 0u);
    if (m == 0) continue;
#ifdef SOFTDLA_X86
    if (c + kChannelsAhead < g_.C) fetch(c + kChannelsAhead);
    split_halves_avx512(x + c * grid_ + p0, hi, lo, m);
    // The next block's 32 halves of this channel (one cache line): a block reads one line from each of
    // C planes, too many streams for the hardware prefetchers once the input is out of cache.
    if (p0 + kUnitPixels < grid_) _mm_prefetch(reinterpret_cast<const char*>(x + c * grid_ + p0 + kUnitPixels), _MM_HINT_T0);
#else
    split_halves(x + c * grid_ + p0, hi, lo, m);
#endif
  }
}

// Columns [c0, c1) of every image's pixel blocks (column c: image c / pixel blocks, block c % pixel blocks),
// each at blocks + c * (its dwords).
void AmxConvF16::pack_columns(const uint16_t* x, size_t image_stride, uint32_t* blocks, size_t c0, size_t c1) const {
  const size_t pixel_blocks = (grid_ + kUnitPixels - 1) / kUnitPixels, block_dwords = c_blocks_ * kBlockDwords;
  for (size_t c = c0; c < c1; ++c)
    pack_pixel_block(x + (c / pixel_blocks) * image_stride, blocks + c * block_dwords, c % pixel_blocks);
}

// Plane units [u0, u1), u = (used phase slot) * c_blocks_ + channel block: phase (a, b) of the zero-padded
// input (its rows a, a + sh, ... and columns b, b + sw, ...) of 16 channels, each pixel's 16 hi pairs in
// one 64-byte row, and lo_offset() dwords further the lo pairs.
void AmxConvF16::pack(const uint16_t* x, uint32_t* planes, size_t u0, size_t u1) const {
  for (size_t u = u0; u < u1; ++u) {
    const size_t slot = u / c_blocks_, cb = u % c_blocks_;
    const uint32_t phase = used_phases_[slot], pa = phase / g_.sw, pb = phase % g_.sw;
    uint32_t* hi = planes + slot * phase_dwords_ + cb * kTile * plane_px_;
    uint32_t* lo = hi + lo_offset();
    // Zeros only where no input lands (padding rows and columns, the slack past the rows): the rest is
    // written below.
    const auto zero = [&](size_t px0, size_t px1) {
      std::fill(hi + px0 * kTile, hi + px1 * kTile, 0u);
      std::fill(lo + px0 * kTile, lo + px1 * kTile, 0u);
    };
    zero(hq_ * wq_, plane_px_);
    const size_t c0 = cb * kTile, channels = std::min<size_t>(kTile, g_.C - c0);
    const PhaseColumns cols = phase_columns(g_.W, g_.pl, g_.sw, wq_, pb);
    const size_t b0 = std::min(cols.first, wq_), b1 = std::max(b0, std::min(cols.past, wq_));
    for (size_t a = 0; a < hq_; ++a) {
      const int64_t i = int64_t(pa + a * g_.sh) - g_.pt;
      if (i < 0 || i >= g_.H || b0 >= b1) {
        zero(a * wq_, (a + 1) * wq_);
        continue;
      }
      zero(a * wq_, a * wq_ + b0);
      zero(a * wq_ + b1, (a + 1) * wq_);
      // Column j of the phase row reads input column pb + j sw - pl of each channel.
      const uint16_t* src = x + (c0 * g_.H + size_t(i)) * g_.W + (pb + b0 * g_.sw - g_.pl);
      const size_t channel_step = size_t(g_.H) * g_.W;
      uint32_t* hi_row = hi + (a * wq_ + b0) * kTile;
      uint32_t* lo_row = lo + (a * wq_ + b0) * kTile;
#ifdef SOFTDLA_X86
      pack_row_avx512(src, g_.sw, channel_step, channels, b1 - b0, hi_row, lo_row);
#else
      zero(a * wq_ + b0, a * wq_ + b1);  // the lanes past C
      for (size_t j = 0; j < b1 - b0; ++j)
        for (size_t c = 0; c < channels; ++c)
          split_halves(src + c * channel_step + j * g_.sw, hi_row + j * kTile + c, lo_row + j * kTile + c, 1);
#endif
    }
  }
}


// One unit: `input` is the planes, or (blocked) the unit's pixel block.
void AmxConvF16::unit(const uint32_t* input, uint32_t n, size_t row0, size_t pix0, const Epilogue& epilogue,
                      const HalfOutput* direct) const {
#ifdef SOFTDLA_X86
  alignas(64) float sums[kUnitRows][kUnitPixels];
  const size_t taps = tap_offsets_.size();
  const size_t rows = std::min<size_t>(kUnitRows, g_.K - row0), pixels = std::min(kUnitPixels, grid_ - pix0);
  GridRun runs[kUnitPixels];
  const size_t n_runs = direct ? grid_runs(pix0, pixels, wq_, g_.OW, runs) : 0;
  if (direct) {
    // The unit's output lines (32 rows in 32 planes, a line or two each per run) and the fused add's
    // other input, fetched before the tile products: a batch's outputs are beyond L2, and the epilogue's
    // stores and loads waited on them (ResNet-50 FP16 at batch 8: 0.93-0.94x the time; the other input
    // alone, no faster).
    const size_t base = n * direct->image_stride + row0 * direct->ld;
    for (size_t r = 0; r < rows; ++r)
      for (size_t i = 0; i < n_runs; ++i) {
        const size_t at = base + r * direct->ld + runs[i].hw0;
        prefetch_run_ends(direct->out + at, runs[i].count);
        if (direct->other) prefetch_run_ends(direct->other + at, runs[i].count);
      }
  }
  const uint32_t* weights = a_tiles_.data() + (row0 / kUnitRows) * c_blocks_ * taps * 2 * kTileDwords;
  if (blocked_) {
    const ActivationTiles blocks{input, kBlockDwords, kBlockDwords / 2, kUnitPixels * sizeof(uint32_t), kTile};
    unit_tiles<false>(weights, blocks, tap_offsets_.data(), taps, c_blocks_, sums);
  } else {
    alignas(64) float sums_t[kUnitPixels][kUnitRows];
    const ActivationTiles pixel_rows{input + pix0 * kTile, kTile * plane_px_, lo_offset(), kTile * sizeof(uint32_t),
                                     kTileDwords};
    unit_tiles<true>(weights, pixel_rows, tap_offsets_.data(), taps, c_blocks_, sums_t);
    transpose_unit_sums(sums_t, sums);
  }
  if (direct) return emit_runs_f16<kUnitRows, kUnitPixels>(&sums[0][0], rows, row0, pixels, runs, n_runs, *direct, n);
  emit_grid_runs(&sums[0][0], kUnitPixels, rows, row0, pix0, pixels, wq_, g_.OW,
                 [&](uint32_t k, size_t hw0, float* v, size_t count) { epilogue(n, k, hw0, v, count); });
#else
  (void)input, (void)n, (void)row0, (void)pix0, (void)epilogue, (void)direct;
#endif
}

void AmxConvF16::run(const uint16_t* x, size_t images, size_t image_stride, ThreadPool& pool,
                     const Epilogue& epilogue, const HalfOutput* direct) const {
  const size_t pixel_blocks = (grid_ + kUnitPixels - 1) / kUnitPixels;
  const size_t columns = images * pixel_blocks;  // every image's pixel blocks
  const size_t block_dwords = c_blocks_ * kBlockDwords;  // a blocked pixel block, every channel
  // Weight pairs that stay in the core's cache are read from there by every pixel block; more are
  // streamed, and then a small grid shares one packed input instead (below).
  const bool weights_cached = a_tiles_.size() * sizeof(uint32_t) < kCachedBytes;
  if (blocked_ && !weights_cached && columns * block_dwords * sizeof(uint32_t) <= kSharedInputBytes) {
    // A small grid (the 7x7 and 14x14 layers) with weights beyond the cache: the whole input packed
    // once, then the units with the pixel blocks (of every image) innermost, so each row block's
    // weights are read once from memory. With weights that stay in cache the blocks below are faster:
    // each thread reads only the blocks it packed (MobileNetV2's 576 -> 96 at 14 x 14 on two threads
    // 0.145 -> 0.079 ms; where the threads shared the packed input, it ran no faster than on one).
    thread_local AlignedVector<uint32_t> blocks;  // the calling thread's (the workers get a pointer), on cache lines
    blocks.resize(columns * block_dwords);
    uint32_t* data = blocks.data();
    pool.parallel_for(columns, [&](size_t b, size_t e) {
      pack_columns(x, image_stride, data, b, e);
    });
    pool.parallel_for(row_blocks_ * columns, [&](size_t b, size_t e) {
      const TileScope tiles;
      for (size_t u = b; u < e; ++u) {
        const size_t c = u % columns;
        unit(data + c * block_dwords, uint32_t(c / pixel_blocks), (u / columns) * kUnitRows,
             (c % pixel_blocks) * kUnitPixels, epilogue, direct);
      }
    });
    return;
  }
  if (blocked_ && pool.size() > 1 && columns < kSpansPerThread * pool.size() &&
      row_blocks_ >= kRowBlocksPerThread * pool.size() && columns * block_dwords * sizeof(uint32_t) <= kSharedInputBytes) {
    // A small grid on several threads (MobileNetV2's 14 x 14 and 7 x 7 layers at batch 1: 7 and 2 pixel
    // blocks): split by pixel blocks, the threads wrote neighbouring pixels of the same output planes, a
    // line shared between the cores at every block's edge in each of K planes, and a 14 x 14 expansion ran
    // no faster on two threads than on one. Here each thread packs the whole (small) input for itself, once
    // per call, and takes whole row blocks: its own output planes. Only where the row blocks are many (an
    // expansion): a projection's few row blocks over a wide input would pack it twice for little (384 ->
    // 64 at 14 x 14: 1.4x the time).
    static std::atomic<uint64_t> calls{0};
    const uint64_t call = calls.fetch_add(1, std::memory_order_relaxed) + 1;
    pool.parallel_for(row_blocks_, [&](size_t b, size_t e) {
      thread_local AlignedVector<uint32_t> whole;  // on cache lines: each tile row a line
      thread_local uint64_t packed_for = 0;        // the call whose input `whole` holds
      if (packed_for != call) {
        whole.resize(columns * block_dwords);
        pack_columns(x, image_stride, whole.data(), 0, columns);
        packed_for = call;
      }
      const TileScope tiles;
      for (size_t rb = b; rb < e; ++rb)
        for (size_t c = 0; c < columns; ++c)
          unit(whole.data() + c * block_dwords, uint32_t(c / pixel_blocks), rb * kUnitRows,
               (c % pixel_blocks) * kUnitPixels, epilogue, direct);
    });
    return;
  }
  if (blocked_) {
    // Each pixel block's input is split where it is used, packed by the thread that then runs every row
    // block over it, so the packed bytes (four times the fp16 input) stay in its cache. A work unit is a
    // span of consecutive pixel blocks of one image, packed together, then each row block over the whole
    // span: every output plane is written a span's consecutive lines at a time, rather than one line in
    // each of K planes per block (too many streams for the prefetchers once the output is out of cache).
    const BlockSpans plan =
        block_spans(pixel_blocks, images, kSpanBytes / (block_dwords * sizeof(uint32_t)), kSpansPerThread, pool.size());
    const size_t span = plan.span, spans = plan.per_image;
    pool.parallel_for(images * spans, [&](size_t b, size_t e) {
      thread_local AlignedVector<uint32_t> blocks;  // on cache lines: each tile row a line
      blocks.resize(span * block_dwords);
      const TileScope tiles;
      for (size_t u = b; u < e; ++u) {
        const size_t n = u / spans, first = (u % spans) * span, last = std::min(pixel_blocks, first + span);
        for (size_t pb = first; pb < last; ++pb)
          pack_pixel_block(x + n * image_stride, blocks.data() + (pb - first) * block_dwords, pb);
        for (size_t rb = 0; rb < row_blocks_; ++rb)
          for (size_t pb = first; pb < last; ++pb)
            unit(blocks.data() + (pb - first) * block_dwords, uint32_t(n), rb * kUnitRows, pb * kUnitPixels,
                 epilogue, direct);
      }
    });
    return;
  }
  // Planes: every image's, then the units with each image's pixel blocks under a row block.
  // The calling thread's (the workers get a pointer), on cache lines: each pixel's pairs are one line.
  thread_local AlignedVector<uint32_t> planes;
  const size_t image_dwords = 2 * lo_offset(), plane_units = used_phases_.size() * c_blocks_;
  planes.resize(images * image_dwords);
  uint32_t* data = planes.data();
  pool.parallel_for(images * plane_units, [&](size_t b, size_t e) {
    for_each_image_part(b, e, plane_units, [&](size_t n, size_t u0, size_t u1) {
      pack(x + n * image_stride, data + n * image_dwords, u0, u1);
    });
  }, ThreadPool::min_items(kTile * plane_px_));
  // The units' order: row blocks innermost keeps a column's planes in cache and streams the weights once
  // per column; columns innermost keeps a row block's weights in cache and streams the planes once per
  // row block. Whichever moves fewer bytes from beyond the core's cache (the last stage's 3x3 layers
  // hold 9 MB of weight pairs over a 7x7 grid: columns innermost).
  const size_t a_bytes = a_tiles_.size() * sizeof(uint32_t), b_bytes = images * image_dwords * sizeof(uint32_t);
  const size_t streamed_rb_inner = (a_bytes > kCachedBytes ? columns * a_bytes : a_bytes) + b_bytes;
  const size_t streamed_col_inner = (b_bytes > kCachedBytes ? row_blocks_ * b_bytes : b_bytes) + a_bytes;
  const bool columns_inner = streamed_col_inner < streamed_rb_inner;
  pool.parallel_for(row_blocks_ * columns, [&](size_t b, size_t e) {
    const TileScope tiles;
    for (size_t u = b; u < e; ++u) {
      const size_t rb = columns_inner ? u / columns : u % row_blocks_, c = columns_inner ? u % columns : u / row_blocks_;
      const size_t n = c / pixel_blocks;
      unit(data + n * image_dwords, uint32_t(n), rb * kUnitRows, (c % pixel_blocks) * kUnitPixels, epilogue, direct);
    }
  });
}

}  // namespace softdla::cpu
