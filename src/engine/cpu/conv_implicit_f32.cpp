#include "conv_implicit_f32.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "conv_implicit.h"
#include "conv_lanes_f16_store.h"
#include "conv_lanes_f32.h"
#include "cpu_isa.h"
#include "half_convert.h"
#include "half_convert_avx512.h"
#include "half_steps_avx512.h"
#include "implicit_grid.h"
#include "kernel_switch.h"
#include "numerics.h"
#include "panel_stream.h"
#include "prefetch_lines.h"
#include "scratch_buffer.h"
#include "x86_simd.h"

namespace softdla::cpu {
namespace {

// Register tiles of up to 12 output channels x 32 grid pixels (24 accumulators); one work unit is 24
// channels x 64 pixels. A block's last rows go on a 4- or 8-row tile and its last 16 pixels or fewer on
// a one-vector tile, so a 64-channel layer computes 64 rows, not 72, and a 14 x 14 grid 208 pixels, not 224.
constexpr size_t kPanelRows = 12, kTilePixels = 32;
constexpr size_t kBlockRows = 24, kBlockPixels = 64;
constexpr size_t kHalvesMaxRows = 160;  // output channels up to which a 1x1 tile widens fp16 itself (measured:
                                         // 24-96 faster, 128-160 alike, from 256 slower than widening once)
constexpr size_t kAhead = 8;  // channels a 1x1 tile prefetches its input ahead (4 to 16 measured alike)
constexpr size_t kUnitsPerThread = 8;  // work units an image group gives each thread at least
constexpr size_t kWidenedBlockBytes = 32 << 10;  // a pixel block widened once for all its tiles, at most

// How a tile reads its pixels: a 1x1 convolution's fp16 input as it is (the planes are the input
// channels), its widened fp32 planes, or k x k taps over the widened planes (9 taps unrolled, or any).
enum class TileInput { kHalves1x1, kFloat1x1, kTaps9, kTaps };

// Where a tile's sums go: rows of the block's sums (sums, ld), or with `direct` through the channels'
// epilogue straight into the fp16 output: channels k0 .. k0 + live_rows - 1 of image `image`, grid
// pixels hw0 .. hw0 + valid - 1. The grid is wq pixels a row for ow outputs: where wq is ow (1x1
// convolutions) a grid pixel is its output index; otherwise (k x k: a row's last wq - ow grid pixels are
// no outputs) each vector's lanes go to one or two output rows (GridLanes).
struct TileSink {
  float* sums;
  size_t ld;
  const HalfOutput* direct;
  uint32_t image;
  size_t k0, live_rows, hw0, valid;
  size_t wq = 0, ow = 0;
};

#ifdef SOFTDLA_X86
__attribute__((target("avx512f,avx512bw,avx512vl,f16c"))) void even_halves_to_floats(const uint16_t* src, size_t n,
                                                                                    float* d) {
  for (size_t i = 0; i < n; i += 16) {
    const size_t values = std::min<size_t>(16, n - i);
    const __mmask16 m = __mmask16((1u << values) - 1);
    _mm512_mask_storeu_ps(d + i, m, _mm512_maskz_cvtph_ps(m, even_halves_avx512(src + 2 * i, values)));
  }
}

// Where the lanes of a k x k tile's kVecs grid vectors go in a channel's output plane: lanes under a[v]
// at index at_a[v] + lane (the vector's first row), lanes under b[v] at at_b[v] + lane (the next row;
// the grid's wq - ow extra pixels of a row are in neither). Needs ow >= 16: a vector then touches at
// most two output rows, and at_b is never below the plane's start.
template <size_t kVecs>
struct GridLanes {
  size_t at_a[kVecs], at_b[kVecs];
  __mmask16 a[kVecs], b[kVecs];

  GridLanes(size_t hw0, size_t valid, size_t wq, size_t ow) {
    size_t row = hw0 / wq, col = hw0 % wq;
    for (size_t v = 0; v < kVecs; ++v) {
      const __mmask16 live = lanes_mask(valid, v);                         // inside the tile
      const __mmask16 first = col < ow ? lanes_mask(ow - col, 0) : 0;      // this row's outputs
      const __mmask16 next = __mmask16(~lanes_mask(wq - col, 0));          // past this grid row
      a[v] = first & live, b[v] = next & live;
      at_a[v] = row * ow + col;
      at_b[v] = next ? (row + 1) * ow + col - wq : 0;
      col += 16;
      if (col >= wq) col -= wq, ++row;
    }
  }
};

// A tile's rows through GridLanes, for step_rows_to_halves: row r is channel plane r (ld apart) from out.
template <size_t kVecs>
struct GridRowsOut {
  const GridLanes<kVecs>& gl;
  uint16_t* out;
  const uint16_t* other;
  size_t ld;

  __attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) __m256i other_at(size_t r, size_t v) const {
    const uint16_t* plane = other + r * ld;
    const __m256i theirs = _mm256_maskz_loadu_epi16(gl.a[v], plane + gl.at_a[v]);
    return _mm256_mask_loadu_epi16(theirs, gl.b[v], plane + gl.at_b[v]);
  }
  __attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) void store(size_t r, size_t v, __m256i h) const {
    uint16_t* plane = out + r * ld;
    _mm256_mask_storeu_epi16(plane + gl.at_a[v], gl.a[v], h);
    if (gl.b[v]) _mm256_mask_storeu_epi16(plane + gl.at_b[v], gl.b[v], h);
  }
};

// x[0 .. kVecs) of one channel through `before`, (with `other`: rounded to fp16, other's values at the
// same outputs added, through `after`) and stored as fp16 through the lanes' map: the same float
// operations per element as steps_to_halves_lanes.
template <size_t kVecs>
__attribute__((target("avx512f,avx512bw,avx512vl,f16c"), always_inline)) inline void grid_steps_to_halves(
    __m512 (&x)[kVecs], const GridLanes<kVecs>& gl, const ChannelStep* before, size_t n_before, uint16_t* out,
    const uint16_t* other, const ChannelStep* after, size_t n_after) {
  apply_steps(before, n_before, x);
  if (other) {
#pragma GCC unroll 2
    for (size_t v = 0; v < kVecs; ++v) {
      __m256i theirs = _mm256_maskz_loadu_epi16(gl.a[v], other + gl.at_a[v]);
      theirs = _mm256_mask_loadu_epi16(theirs, gl.b[v], other + gl.at_b[v]);
      x[v] = _mm512_add_ps(_mm512_cvtph_ps(to_halves_avx512(x[v])), _mm512_cvtph_ps(theirs));
    }
    apply_steps(after, n_after, x);
  }
#pragma GCC unroll 2
  for (size_t v = 0; v < kVecs; ++v) {
    const __m256i h = to_halves_avx512(x[v]);
    _mm256_mask_storeu_epi16(out + gl.at_a[v], gl.a[v], h);
    if (gl.b[v]) _mm256_mask_storeu_epi16(out + gl.at_b[v], gl.b[v], h);
  }
}

// One k step of a tile: c[r][v] += panel[r] * x[v].
template <size_t kRows, size_t kVecs>
__attribute__((target("avx512f,fma"), always_inline)) inline void fma_step(const float* pa, const __m512 (&x)[kVecs],
                                                                         __m512 (&c)[kRows][kVecs]) {
#pragma GCC unroll 12
  for (size_t r = 0; r < kRows; ++r) {
    const __m512 w = _mm512_set1_ps(pa[r]);
#pragma GCC unroll 2
    for (size_t v = 0; v < kVecs; ++v) c[r][v] = _mm512_fmadd_ps(w, x[v], c[r][v]);
  }
}

// kRows output channels x 16 kVecs grid pixels. `panel` is the rows' weight panel (k-major, kPanelRows
// floats a step, the tile's rows first); b points at the tile's first pixel in plane 0, planes plane_px
// elements apart; offsets[t] shifts to tap t. Each output's sum runs over k = (c, r, s) ascending with one
// FMA per k from 0, whatever the tile's shape or input, so every path gives the same bits.
// kHalves1x1: each step's pixels widened in registers, sink.valid of them read and the rest as zeros
// (past the plane's end).
template <size_t kRows, size_t kVecs, TileInput kInput, class T>
__attribute__((target("avx512f,avx512bw,avx512vl,fma,f16c,prfchw"), noinline)) void tile_f32(
    const float* panel, const T* b, size_t plane_px, const size_t* offsets, size_t taps, size_t channels,
    const TileSink& sink) {
  __m512 c[kRows][kVecs];
#pragma GCC unroll 12
  for (size_t r = 0; r < kRows; ++r)
#pragma GCC unroll 2
    for (size_t v = 0; v < kVecs; ++v) c[r][v] = _mm512_setzero_ps();
  const float* pa = panel;
  if (sink.direct && sink.wq == sink.ow) {
    // The output's lines (and the residual operand's), asked for before the FMAs so that the epilogue
    // does not wait on them: a line per channel row, the rows far apart.
    const HalfOutput& o = *sink.direct;
    const size_t last = sink.valid - 1;
#pragma GCC unroll 12
    for (size_t r = 0; r < kRows; ++r)
      if (r < sink.live_rows) {
        const size_t at = sink.image * o.image_stride + (sink.k0 + r) * o.ld + sink.hw0;
        __builtin_prefetch(o.out + at, 1, 3);
        __builtin_prefetch(o.out + at + last, 1, 3);
        if (o.other) {
          _mm_prefetch(reinterpret_cast<const char*>(o.other + at), _MM_HINT_T0);
          _mm_prefetch(reinterpret_cast<const char*>(o.other + at + last), _MM_HINT_T0);
        }
      }
  }
  if constexpr (kInput == TileInput::kHalves1x1) {
    __mmask16 m[kVecs];
    for (size_t v = 0; v < kVecs; ++v) m[v] = lanes_mask(sink.valid, v);
    for (size_t ch = 0; ch < channels; ++ch, b += plane_px) {
      _mm_prefetch(reinterpret_cast<const char*>(b + kAhead * plane_px), _MM_HINT_T0);
      __m512 x[kVecs];
      for (size_t v = 0; v < kVecs; ++v) x[v] = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m[v], b + 16 * v));
      fma_step(pa, x, c), pa += kPanelRows;
    }
  } else if constexpr (kInput == TileInput::kFloat1x1) {
    for (size_t ch = 0; ch < channels; ++ch, b += plane_px) {
      // The planes are far apart (one per channel), each step a new pair of lines: fetched kAhead
      // channels early they are in L1 when read (a 512-channel 1x1 layer: 0.98 -> 0.66 ms on a Xeon).
      for (size_t v = 0; v < kVecs; ++v)
        _mm_prefetch(reinterpret_cast<const char*>(b + kAhead * plane_px + 16 * v), _MM_HINT_T0);
      __m512 x[kVecs];
      for (size_t v = 0; v < kVecs; ++v) x[v] = _mm512_loadu_ps(b + 16 * v);
      fma_step(pa, x, c), pa += kPanelRows;
    }
  } else {
    constexpr size_t kTaps = kInput == TileInput::kTaps9 ? 9 : 0;
    size_t offs[kTaps ? kTaps : 1];
    if constexpr (kTaps != 0)
      for (size_t t = 0; t < kTaps; ++t) offs[t] = offsets[t];
    for (size_t ch = 0; ch < channels; ++ch, b += plane_px) {
#pragma GCC unroll 9
      for (size_t t = 0; t < (kTaps ? kTaps : taps); ++t) {
        const float* xp = b + (kTaps ? offs[t] : offsets[t]);
        __m512 x[kVecs];
        for (size_t v = 0; v < kVecs; ++v) x[v] = _mm512_loadu_ps(xp + 16 * v);
        fma_step(pa, x, c), pa += kPanelRows;
      }
    }
  }
  // Every loop over the accumulators unrolled: an index known only at run time would keep c in memory,
  // stored on every k step.
  if (!sink.direct) {
#pragma GCC unroll 12
    for (size_t r = 0; r < kRows; ++r)
#pragma GCC unroll 2
      for (size_t v = 0; v < kVecs; ++v) _mm512_storeu_ps(sink.sums + r * sink.ld + 16 * v, c[r][v]);
    return;
  }
  const HalfOutput& o = *sink.direct;
  // A tile of whole rows (every row a channel) goes through the step-major chain: each step's kind
  // dispatched once a tile, no per-row address arithmetic (MobileNetV2's 16 -> 96 at 112 x 112: 0.47 ->
  // 0.34 ms on one thread). Rows past K take the per-channel form below.
  const bool step_rows = o.rows && sink.live_rows == kRows && (!o.other || o.rows_after);
  const size_t at0 = sink.image * o.image_stride + sink.k0 * o.ld;
  if (sink.wq != sink.ow) {
    const GridLanes<kVecs> gl(sink.hw0, sink.valid, sink.wq, sink.ow);
    if (step_rows)
      return step_rows_to_halves(c, *o.rows, o.rows_after, sink.k0,
                                 GridRowsOut<kVecs>{gl, o.out + at0, o.other ? o.other + at0 : nullptr, o.ld});
#pragma GCC unroll 12
    for (size_t r = 0; r < kRows; ++r) {
      if (r < sink.live_rows) {
        const size_t k = sink.k0 + r, plane = sink.image * o.image_stride + k * o.ld;
        __m512 row[kVecs];
#pragma GCC unroll 2
        for (size_t v = 0; v < kVecs; ++v) row[v] = c[r][v];
        grid_steps_to_halves(row, gl, o.steps + k * o.n_steps, o.n_steps, o.out + plane,
                             o.other ? o.other + plane : nullptr, o.after + k * o.n_after, o.n_after);
      }
    }
    return;
  }
  if (step_rows) {
    uint16_t* out = o.out + at0 + sink.hw0;
    const uint16_t* other = o.other ? o.other + at0 + sink.hw0 : nullptr;
    if (sink.valid == 16 * kVecs)
      return step_rows_to_halves(c, *o.rows, o.rows_after, sink.k0, TileRowsOut<kVecs, true>{out, other, o.ld, {}});
    TileRowsOut<kVecs, false> partial{out, other, o.ld, {}};
    for (size_t v = 0; v < kVecs; ++v) partial.masks[v] = lanes_mask(sink.valid, v);
    return step_rows_to_halves(c, *o.rows, o.rows_after, sink.k0, partial);
  }
  __mmask16 masks[kVecs];
  for (size_t v = 0; v < kVecs; ++v) masks[v] = lanes_mask(sink.valid, v);
  const size_t vecs = (sink.valid + 15) / 16;
#pragma GCC unroll 12
  for (size_t r = 0; r < kRows; ++r) {
    if (r < sink.live_rows) {
      const size_t k = sink.k0 + r, at = sink.image * o.image_stride + k * o.ld + sink.hw0;
      __m512 row[kVecs];
#pragma GCC unroll 2
      for (size_t v = 0; v < kVecs; ++v) row[v] = c[r][v];
      steps_to_halves_lanes(row, vecs, masks, o.steps + k * o.n_steps, o.n_steps, o.out + at,
                            o.other ? o.other + at : nullptr, o.after + k * o.n_after, o.n_after);
    }
  }
}

using TileFn = void (*)(const float*, const void*, size_t, const size_t*, size_t, size_t, const TileSink&);

// Channels row0 .. row0 + rows - 1 of image n, outputs hw0 .. hw0 + count - 1: their lines fetched for
// writing (into L2: they are written a unit or more later).
__attribute__((target("prfchw"))) void prefetch_output_lines(const HalfOutput& o, uint32_t n, size_t row0, size_t rows,
                                                              size_t hw0, size_t count) {
  for (size_t r = 0; r < rows; ++r) {
    const uint16_t* line = o.out + n * o.image_stride + (row0 + r) * o.ld + hw0;
    for (size_t i = 0; i < count; i += 32) __builtin_prefetch(line + i, 1, 2);
    __builtin_prefetch(line + count - 1, 1, 2);
  }
}

template <size_t kRows, size_t kVecs, TileInput kInput>
void tile_entry(const float* panel, const void* b, size_t plane_px, const size_t* offsets, size_t taps, size_t channels,
                const TileSink& sink) {
  using T = std::conditional_t<kInput == TileInput::kHalves1x1, uint16_t, float>;
  tile_f32<kRows, kVecs, kInput>(panel, static_cast<const T*>(b), plane_px, offsets, taps, channels, sink);
}

// The tile for `live` rows (rounded up to 4, 8 or 12) and `pixels` pixels (one vector up to 16).
template <TileInput kInput>
TileFn tile_for(size_t live, size_t pixels) {
  const bool one = pixels <= 16;
  if (live <= 4) return one ? tile_entry<4, 1, kInput> : tile_entry<4, 2, kInput>;
  if (live <= 8) return one ? tile_entry<8, 1, kInput> : tile_entry<8, 2, kInput>;
  return one ? tile_entry<12, 1, kInput> : tile_entry<12, 2, kInput>;
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

// Grid pixels the pixel-vector tiles compute over a grid: whole blocks, then the last block's 32-pixel
// tiles and its last one of 16 or 32.
size_t vector_tile_pixels(size_t grid) {
  const size_t rem = grid % kBlockPixels, tail = rem % kTilePixels;
  return grid - rem + rem / kTilePixels * kTilePixels + (tail == 0 ? 0 : tail <= 16 ? 16 : kTilePixels);
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
  // Stride 1 without padding: the planes are the input channels as they are. A 1x1 convolution of that
  // kind with few output channels (each input value read by K / 12 tiles) has its tiles widen the fp16
  // input themselves.
  plain_planes_ = g.pt == 0 && g.pl == 0 && g.sh == 1 && g.sw == 1 && wq_ == g.W && hq_ == g.H;
  reads_halves_ = plain_planes_ && g.R == 1 && g.S == 1 && g.K <= kHalvesMaxRows;
  // A 1x1 convolution over a grid the pixel vectors fit badly (7 x 7) puts output channels on the lanes.
  lanes_ = g.R == 1 && g.S == 1 && lanes_f32::pays(g.K, grid_, vector_tile_pixels(grid_));
  if (lanes_) reads_halves_ = false;
  // A k x k one of that kind gathers its pixels (a 3 x 3 layer at 7 x 7: 49 outputs a channel against
  // 64 grid pixels computed).
  // SOFTDLA_F16_GATHER: unset (by that rule), 1 (every k x k layer of this path) or 0 (none).
  static const size_t gather_mode = kernel_switch("SOFTDLA_F16_GATHER", {"auto", "1", "0"});
  gathers_ = !lanes_ && !(g.R == 1 && g.S == 1 && plain_planes_) && gather_mode != 2 &&
             (gather_mode == 1 || lanes_f32::pays(g.K, size_t(g.OH) * g.OW, vector_tile_pixels(grid_)));
  // Where a pixel column takes many tiles (48 output channels or more), each tile widened the same fp16
  // input again: two conversions a step beside 24 FMAs, on the FMA ports. The block is widened once into
  // L1 instead, where it fits (MobileNetV2's 16 -> 96 and 24 -> 144: 0.90-0.97x the time; with two or
  // three tiles a column the widening costs more than it saves: 96 -> 24 1.25-1.4x, 32 -> 16 1.35x).
  widens_blocks_ = reads_halves_ && g.K >= 4 * kPanelRows &&
                   size_t(g.C) * kBlockPixels * sizeof(float) <= kWidenedBlockBytes;
  const size_t panel = lanes_ || gathers_ ? lanes_f32::kBlockChannels : kPanelRows;
  block_rows_ = lanes_ || gathers_ ? lanes_f32::kBlockChannels : kBlockRows;
  k_rows_ = (size_t(g.K) + panel - 1) / panel * panel;
  // Panels of `panel` output channels, k-major ([K / panel][C * R * S][panel], zero rows past K): a tile
  // reads its weights as one stream. [K][C][R][S] is already k = (c, r, s) within a row.
  const size_t kdim = size_t(g.C) * g.R * g.S;
  weights_.assign(k_rows_ * kdim, 0.f);
  for (size_t k = 0; k < g.K; ++k)
    for (size_t j = 0; j < kdim; ++j) weights_[(k / panel * kdim + j) * panel + k % panel] = weights[k * kdim + j];
  if (gathers_) {
    for (size_t c = 0; c < g.C; ++c)
      for (const size_t tap : tap_offsets_) k_off_.push_back(c * plane_px_ + tap);
    k_off_.resize(k_off_.size() + lanes_f32::kGatherAhead, k_off_.back());
    for (size_t oh = 0; oh < g.OH; ++oh)
      for (size_t ow = 0; ow < g.OW; ++ow) pixel_off_.push_back(oh * wq_ + ow);
  }
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
      // Strided rows are read under masks (even_halves_to_floats), which the hardware prefetchers do
      // not follow: the row kStridedRowsAhead phase rows below, fetched now (prefetch_lines.h).
      if (g_.sw > 1) {
        const size_t elem = halves ? sizeof(uint16_t) : sizeof(float);
        prefetch_lines(x, std::ptrdiff_t((src + kStridedRowsAhead * g_.sh * g_.W) * elem), (b1 - b0) * g_.sw * elem);
      }
      float* d = dst + a * wq_ + b0;
      if (halves) strided_halves_to_floats(static_cast<const uint16_t*>(x) + src, g_.sw, b1 - b0, d);
      else strided_floats(static_cast<const float*>(x) + src, g_.sw, b1 - b0, d);
    }
  }
}

void ImplicitConvF32::block(const float* planes, const uint16_t* halves, uint32_t n, size_t row0, size_t pix0,
                            const Epilogue& epilogue, const HalfOutput* direct, bool block_planes) const {
#ifdef SOFTDLA_X86
  const size_t taps = tap_offsets_.size(), kdim = size_t(g_.C) * taps;
  alignas(64) float sums[lanes_f32::kBlockChannels * kBlockPixels];
  const size_t rows = std::min<size_t>(block_rows_, g_.K - row0), pixels = std::min(kBlockPixels, grid_ - pix0);
  const bool one_by_one = taps == 1 && tap_offsets_[0] == 0;
  // The tiles store through the epilogue themselves: a 1x1 convolution's grid is its output; a k x k
  // one's rows are wider than its output rows by the kernel's reach, which a vector of 16 grid pixels
  // crosses at most once where the output rows have 16 pixels or more (GridLanes). Otherwise the sums
  // go through the block's rows and out run by run (emit_runs_f16; ResNet's and MobileNetV2's first
  // layers spent a quarter of their time there).
  const bool grid_is_output = wq_ == g_.OW;
  const HalfOutput* tiles_store = !lanes_ && (grid_is_output || g_.OW >= 16) ? direct : nullptr;
  // The same rows' output lines of the next pixel block, which a later unit writes (the next one where
  // row blocks are outermost, a few later where they are innermost): a tile's own prefetch leads its
  // stores by one short reduction (16 channels: a few hundred cycles), too little for lines in L3.
  // MobileNetV2 FP16 at batch 1 on two threads 0.93-0.95x the time.
  if (tiles_store && grid_is_output && pix0 + kBlockPixels < grid_)
    prefetch_output_lines(*tiles_store, n, row0, rows, pix0 + kBlockPixels,
                          std::min(kBlockPixels, grid_ - pix0 - kBlockPixels));
  // Tiles that read the fp16 input as it is (1x1, few output channels): the next pixel block's input
  // lines, one or two in each of C planes, fetched a block ahead. The tiles' own prefetch runs kAhead
  // channels ahead inside a reduction of 16 to 160 channels, so a block's first lines were never
  // fetched early (MobileNetV2 FP16 0.93-0.97x the time, 0.89-0.93x at batch 8 on one thread;
  // ResNet-50 at batch 8 0.92-0.97x).
  if (halves && pix0 + kBlockPixels < grid_) prefetch_block_input(halves, pix0 + kBlockPixels);
  // The lane tiles of a plain 1x1 convolution store their whole 8-pixel tiles through the epilogue
  // themselves (conv_lanes_f16_store.h); `stored` counts the block's leading pixels they took.
  const bool lanes_store = lanes_ && one_by_one && plain_planes_ && direct && direct->lanes &&
                           (!direct->other || direct->lanes_after);
  size_t stored = 0;
  if (lanes_) {
    const float* panel = weights_.data() + row0 * kdim;  // row0 is a panel's first row
    for (size_t p = 0; p < pixels; p += lanes_f32::kTilePixels) {
      const size_t width = std::min(lanes_f32::kTilePixels, pixels - p);
      if (lanes_store && width == lanes_f32::kTilePixels) {
        const lanes_f32::HalfSink sink{direct, n, row0, rows, pix0 + p};
        lanes_f32::tile_to_halves_for(rows)(panel, planes + pix0 + p, plane_px_, g_.C, sink);
        stored = p + width;
        continue;
      }
      lane_tile_for<lanes_f32::Tiles>(rows, width)(panel, planes + pix0 + p, plane_px_, g_.C, sums + p, kBlockPixels);
    }
  } else {
    for (size_t p = 0; p < pixels; p += kTilePixels) {
      const size_t width = std::min(kTilePixels, pixels - p);
      for (size_t r = 0; r < rows;) {
        const size_t live = std::min(kPanelRows, rows - r);
        const TileSink sink{sums + r * kBlockPixels + p, kBlockPixels, tiles_store, n, row0 + r, live, pix0 + p, width,
                            wq_, g_.OW};
        const float* panel = weights_.data() + (row0 + r) * kdim;  // row0 + r is a panel's first row
        const TileFn tile = halves       ? tile_for<TileInput::kHalves1x1>(live, width)
                            : one_by_one ? tile_for<TileInput::kFloat1x1>(live, width)
                            : taps == 9  ? tile_for<TileInput::kTaps9>(live, width)
                                         : tile_for<TileInput::kTaps>(live, width);
        if (halves) tile(panel, halves + pix0 + p, grid_, nullptr, 1, g_.C, sink);
        else if (block_planes) tile(panel, planes + p, kBlockPixels, tap_offsets_.data(), taps, g_.C, sink);
        else tile(panel, planes + pix0 + p, plane_px_, tap_offsets_.data(), taps, g_.C, sink);
        r += live;
      }
    }
  }
  if (tiles_store) return;
  if (direct) {
    if (stored == pixels) return;
    GridRun runs[kBlockPixels];
    const size_t n_runs = grid_runs(pix0 + stored, pixels - stored, wq_, g_.OW, runs);
    return emit_runs_f16<lanes_f32::kBlockChannels, kBlockPixels>(sums + stored, rows, row0, pixels - stored, runs,
                                                                  n_runs, *direct, n);
  }
  emit_grid_runs(sums, kBlockPixels, rows, row0, pix0, pixels, wq_, g_.OW,
                 [&](uint32_t k, size_t hw0, float* v, size_t count) { epilogue(n, k, hw0, v, count); });
#else
  (void)planes, (void)halves, (void)row0, (void)pix0, (void)epilogue, (void)direct, (void)n, (void)block_planes;
#endif
}

const float* ImplicitConvF32::panel_of(size_t block) const {
  return weights_.data() + block * lanes_f32::kBlockChannels * g_.C * tap_offsets_.size();
}

size_t ImplicitConvF32::panel_bytes() const {
  return lanes_f32::kBlockChannels * g_.C * tap_offsets_.size() * sizeof(float);
}

void ImplicitConvF32::prefetch_block_input(const uint16_t* image, size_t pix0) const {
#ifdef SOFTDLA_X86
  const size_t count = std::min(kBlockPixels, grid_ - pix0);
  for (size_t c = 0; c < g_.C; ++c) prefetch_run_ends(image + c * grid_ + pix0, count);
#else
  (void)image, (void)pix0;
#endif
}

void ImplicitConvF32::run_widened_blocks(const uint16_t* x, size_t images, size_t image_stride, ThreadPool& pool,
                                         const Epilogue& epilogue, const HalfOutput* direct) const {
  const size_t pixel_blocks = (grid_ + kBlockPixels - 1) / kBlockPixels;
  // A unit is a span of consecutive pixel blocks, widened together (up to kWidenedBlockBytes), then each
  // row block over the whole span: a row block's output planes are written a span at a time, so fewer
  // planes' lines are open at once than when every row block follows each 64-pixel block. Spans stay
  // short enough to leave every thread kUnitsPerThread units.
  const size_t block_floats = size_t(g_.C) * kBlockPixels;
  const BlockSpans plan = block_spans(pixel_blocks, images, kWidenedBlockBytes / (block_floats * sizeof(float)),
                                      kUnitsPerThread, pool.size());
  const size_t span = plan.span, spans = plan.per_image;
  pool.parallel_for(images * spans, [&](size_t b, size_t e) {
    thread_local ScratchBuffer widened;
    float* span_planes = reinterpret_cast<float*>(widened.reserve(span * block_floats * sizeof(float)));
    for (size_t u = b; u < e; ++u) {
      const size_t n = u / spans, first = (u % spans) * span, last = std::min(pixel_blocks, first + span);
      const uint16_t* xn = x + n * image_stride;
      for (size_t pb = first; pb < last; ++pb) {
        const size_t pix0 = pb * kBlockPixels, pixels = std::min(kBlockPixels, grid_ - pix0);
        float* block_planes = span_planes + (pb - first) * block_floats;
        for (size_t c = 0; c < g_.C; ++c) {
          float* row = block_planes + c * kBlockPixels;
          halves_to_floats(xn + c * grid_ + pix0, row, pixels);
          std::fill(row + pixels, row + kBlockPixels, 0.f);  // read by the last tile's vectors, never stored
        }
      }
      // The next span's first input lines, fetched while this span's tiles run.
      if (u + 1 < e)
        prefetch_block_input(x + (u + 1) / spans * image_stride, ((u + 1) % spans) * span * kBlockPixels);
      for (size_t row0 = 0; row0 < g_.K; row0 += block_rows_)
        for (size_t pb = first; pb < last; ++pb)
          block(span_planes + (pb - first) * block_floats, nullptr, uint32_t(n), row0, pb * kBlockPixels, epilogue,
                direct, true);
    }
  });
}

void ImplicitConvF32::run_gathered(const float* planes, size_t image_floats, size_t n0, size_t count,
                                   ThreadPool& pool, const Epilogue& epilogue, const HalfOutput* direct) const {
  // Images outermost (a thread reads the images it packed, as the INT8 lane tiles do), then blocks of 48
  // output channels, then each image's output pixels in parts of whole tiles, up to kBlockPixels (the
  // sums' rows), enough of them for kUnitsPerThread units a thread.
  const size_t blocks = k_rows_ / lanes_f32::kBlockChannels, pixels = pixel_off_.size(), tile = lanes_f32::kTilePixels;
  const size_t want = (kUnitsPerThread * pool.size() + blocks * count - 1) / (blocks * count);
  const size_t part = lane_unit_pixels(pixels, want, tile, kBlockPixels), n_parts = (pixels + part - 1) / part;
  const size_t per_image = blocks * n_parts;
  pool.parallel_for(count * per_image, [&](size_t b, size_t e) {
    const PanelStreamScope stream_scope;
    for (size_t u = b; u < e; ++u) {
      const size_t image = u / per_image, block = u % per_image / n_parts, col0 = u % n_parts * part;
      // The panel this thread reads next: the next block's (the next image's first after the last block).
      const size_t next = next_block_in_walk(image, block, count, blocks);
      stream_panel_part(next < blocks ? panel_of(next) : nullptr, panel_bytes(), u % n_parts, n_parts);
      gathered_unit(planes + image * image_floats, uint32_t(n0 + image), block * lanes_f32::kBlockChannels, col0,
                    std::min(part, pixels - col0), epilogue, direct);
    }
  });
}

void ImplicitConvF32::gathered_unit(const float* planes, uint32_t n, size_t row0, size_t col0, size_t cols,
                                    const Epilogue& epilogue, const HalfOutput* direct) const {
#ifdef SOFTDLA_X86
  alignas(64) float sums[lanes_f32::kBlockChannels * kBlockPixels];
  const size_t rows = std::min<size_t>(lanes_f32::kBlockChannels, g_.K - row0);
  const size_t steps = size_t(g_.C) * tap_offsets_.size(), tile = lanes_f32::kTilePixels;
  const float* panel = weights_.data() + row0 * steps;  // row0 is a panel's first row
  // Whole tiles store themselves through the epilogue in lanes (conv_lanes_f16_store.h); the last, short
  // one goes through the sums' rows. `stored` counts the leading pixels stored.
  const bool tiles_store = direct && direct->lanes && (!direct->other || direct->lanes_after);
  size_t stored = 0;
  for (size_t p = 0; p < cols; p += tile) {
    const size_t width = std::min(tile, cols - p);
    const size_t* offs = pixel_off_.data() + col0 + p;
    if (tiles_store && width == tile) {
      const lanes_f32::HalfSink sink{direct, n, row0, rows, col0 + p};
      lanes_f32::gather_to_halves_for(rows)(panel, planes, offs, k_off_.data(), steps, sink);
      stored = p + width;
      continue;
    }
    lane_tile_for<lanes_f32::GatherTiles>(rows, width)(panel, planes, offs, k_off_.data(), steps, sums + p,
                                                       kBlockPixels);
  }
  if (stored == cols) return;
  if (direct) {
    const GridRun run{0, uint32_t(cols - stored), col0 + stored};
    return emit_runs_f16<lanes_f32::kBlockChannels, kBlockPixels>(sums + stored, rows, row0, cols - stored, &run, 1,
                                                                  *direct, n);
  }
  // The pixels are output indices: a grid as wide as the output.
  emit_grid_runs(sums, kBlockPixels, rows, row0, col0, cols, g_.OW, g_.OW,
                 [&](uint32_t k, size_t hw0, float* v, size_t count) { epilogue(n, k, hw0, v, count); });
#else
  (void)planes, (void)n, (void)row0, (void)col0, (void)cols, (void)epilogue, (void)direct;
#endif
}

void ImplicitConvF32::run(const void* x, size_t images, size_t image_stride, bool halves, ThreadPool& pool,
                          const Epilogue& epilogue, const HalfOutput* direct) const {
  const size_t row_blocks = (g_.K + block_rows_ - 1) / block_rows_;
  const size_t pixel_blocks = (grid_ + kBlockPixels - 1) / kBlockPixels;
  // The units of `count` images, each image's input `image_bytes` as the blocks read it:
  // block_of(n, row0, pix0) runs one of the n-th image. Either order re-reads one operand: row blocks
  // outermost read the input once per row block, columns (pixel blocks) outermost the weights once per
  // column; the order that reads fewer bytes is taken.
  const size_t weight_bytes = k_rows_ * size_t(g_.C) * tap_offsets_.size() * sizeof(float);
  auto units = [&](size_t count, size_t image_bytes, const auto& block_of) {
    const size_t columns = count * pixel_blocks;
    const bool columns_outer = weight_bytes * columns < image_bytes * count * row_blocks;
    pool.parallel_for(row_blocks * columns, [&](size_t b, size_t e) {
      const PanelStreamScope stream_scope;
      for (size_t u = b; u < e; ++u) {
        const size_t row = columns_outer ? u % row_blocks : u / columns;
        const size_t column = columns_outer ? u / row_blocks : u % columns;
        // The lane tiles' next panel (panel_stream.h): columns outermost, the next row block's, whole
        // (the next column's first after the last); rows outermost, a share of the next row block's, each
        // of this row's columns fetching its own.
        if (lanes_) {
          const bool last = columns_outer ? u + 1 == row_blocks * columns : row + 1 == row_blocks;
          stream_panel_part(last ? nullptr : panel_of((row + 1) % row_blocks), panel_bytes(),
                            columns_outer ? 0 : column, columns_outer ? 1 : columns);
        }
        block_of(column / pixel_blocks, row * block_rows_, (column % pixel_blocks) * kBlockPixels);
      }
    });
  };
  if (halves && widens_blocks_ &&
      images * ((grid_ + kBlockPixels - 1) / kBlockPixels) >= kUnitsPerThread * pool.size())
    return run_widened_blocks(static_cast<const uint16_t*>(x), images, image_stride, pool, epilogue, direct);
  if (halves && reads_halves_) {
    // The tiles read the fp16 input: no widened copy (for few output channels, widening the whole input
    // took a third of the layer).
    const uint16_t* xh = static_cast<const uint16_t*>(x);
    return units(images, size_t(g_.C) * grid_ * sizeof(uint16_t), [&](size_t n, size_t row0, size_t pix0) {
      block(nullptr, xh + n * image_stride, uint32_t(n), row0, pix0, epilogue, direct);
    });
  }
  thread_local ScratchBuffer planes;  // the calling thread's: the workers get a pointer
  const size_t slots = used_phases_.size() * g_.C, image_floats = slots * plane_px_;
  // The batch in image groups, as the INT8 implicit GEMM takes it (implicit_grid.h): the weights are
  // read once per group, not once per image. A group also holds enough work units to keep every thread
  // busy: a 14 x 14 layer with 64 output channels has 8 unequal units an image, which two threads
  // shared at 1.3-1.6x the one-thread speed.
  const size_t per_image = row_blocks * pixel_blocks, wanted = kUnitsPerThread * pool.size();
  const size_t group =
      std::min(images, std::max(image_group(image_floats * sizeof(float), images),
                                (wanted + per_image - 1) / per_image));
  float* data = reinterpret_cast<float*>(planes.reserve(group * image_floats * sizeof(float)));
  const size_t elem = halves ? sizeof(uint16_t) : sizeof(float);
  for_each_image_group(
      pool, images, group, slots, ThreadPool::min_items(plane_px_),
      [&](size_t n, size_t slot, size_t u0, size_t u1) {
        pack(static_cast<const uint8_t*>(x) + n * image_stride * elem, halves, data + slot * image_floats, u0, u1);
      },
      [&](size_t n0, size_t count) {
        if (gathers_) return run_gathered(data, image_floats, n0, count, pool, epilogue, direct);
        units(count, image_floats * sizeof(float), [&](size_t n, size_t row0, size_t pix0) {
          block(data + n * image_floats, nullptr, uint32_t(n0 + n), row0, pix0, epilogue, direct);
        });
      });
}

}  // namespace softdla::cpu
