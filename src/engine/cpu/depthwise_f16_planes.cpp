#include "depthwise_f16_planes.h"

#include <algorithm>
#include <bit>
#include <utility>

#include "half_convert_avx512.h"
#include "half_steps_avx512.h"
#include "kernel_switch.h"
#include "x86_simd.h"

namespace softdla::cpu {
namespace {

constexpr size_t kLanes = 16;   // output columns a vector
constexpr size_t kMaxVecs = 8;  // output vectors computed together: independent FMA chains
constexpr size_t kBandBytes = 24 << 10;  // widened input rows a band holds: about half of L1
// Where the planes beat the channel blocks on the auto rule: stride 1 and rows of 28 outputs or more.
// Measured on an AMX Xeon (conv_bench, MobileNetV2's layers, one thread, blocks -> planes): 112 x 112
// 0.157 -> 0.110 ms, 56 x 56 0.194 -> 0.152, 28 x 28 0.071 -> 0.058; but 14 x 14 0.055 -> 0.062 and
// 7 x 7 0.036 -> 0.057 (14 or 7 of 16 lanes used), and every stride-2 layer ties or loses (112 -> 56
// 0.21 both, 56 -> 28 0.083 -> 0.088, 28 -> 14 0.030 -> 0.041: each output vector widens four input
// vectors, through a permute).
constexpr uint32_t kMinColumns = 28;

// SOFTDLA_DW_F16: auto (the rule above), planes (every layer the plane kernel takes: the tests use it)
// or blocks (none).
enum class DwF16Choice { kAuto, kPlanes, kBlocks };
DwF16Choice dw_f16_choice() {
  static const auto choice = DwF16Choice(kernel_switch("SOFTDLA_DW_F16", {"auto", "planes", "blocks"}));
  return choice;
}

size_t round_up(size_t v, size_t m) { return (v + m - 1) / m * m; }

// A thread's band of widened input rows, reused across units and layers.
struct PlaneScratch {
  std::vector<float> storage;

  // `floats` zeros, the first of them `lead` floats past a 64-byte boundary.
  float* zeroed(size_t floats, size_t lead) {
    storage.assign(floats + 2 * kLanes, 0.f);
    const auto p = reinterpret_cast<uintptr_t>(storage.data());
    return reinterpret_cast<float*>((p + 63) & ~uintptr_t(63)) + lead;
  }
};

#ifdef SOFTDLA_X86
__attribute__((always_inline)) inline __mmask16 first16(size_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << n) - 1);
}

// Input row `src` (W halves) widened into padded columns pl .. pl + W - 1 of a stride-1 band row; dst (the
// row's column pl) is 64-byte aligned.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void widen_row_s1(const uint16_t* src, size_t W, float* dst) {
  size_t w0 = 0;
  for (; w0 + kLanes <= W; w0 += kLanes)
    _mm512_store_ps(dst + w0, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + w0))));
  if (w0 < W) {
    const __mmask16 m = first16(W - w0);
    _mm512_mask_store_ps(dst + w0, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, src + w0)));
  }
}

// The same for a stride-2 band row: padded column j goes to phase j % 2 at index j / 2. Thirty-two
// halves at a time, split into the even- and odd-indexed ones by one permute.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void widen_row_s2(const uint16_t* src, size_t W, size_t pl,
                                                                     float* row, size_t phase_len) {
  alignas(64) static constexpr uint16_t kSplit[32] = {0,  2,  4,  6,  8,  10, 12, 14, 16, 18, 20,
                                                      22, 24, 26, 28, 30, 1,  3,  5,  7,  9,  11,
                                                      13, 15, 17, 19, 21, 23, 25, 27, 29, 31};
  const __m512i split = _mm512_load_si512(kSplit);
  for (size_t w0 = 0; w0 < W; w0 += 2 * kLanes) {
    const size_t n = std::min<size_t>(2 * kLanes, W - w0), j0 = pl + w0;
    const __mmask32 m = n >= 32 ? __mmask32(0xFFFFFFFFu) : __mmask32((1u << n) - 1);
    const __m512i v = _mm512_permutexvar_epi16(split, _mm512_maskz_loadu_epi16(m, src + w0));
    // Halves 0, 2, 4, ... are padded columns j0, j0 + 2, ...; halves 1, 3, ... are j0 + 1, j0 + 3, ...
    float* evens = row + (j0 % 2) * phase_len + j0 / 2;
    float* odds = row + ((j0 + 1) % 2) * phase_len + (j0 + 1) / 2;
    _mm512_mask_storeu_ps(evens, first16((n + 1) / 2), _mm512_cvtph_ps(_mm512_castsi512_si256(v)));
    if (n > 1) _mm512_mask_storeu_ps(odds, first16(n / 2), _mm512_cvtph_ps(_mm512_extracti64x4_epi64(v, 1)));
  }
}

// `groups` groups of kRows output rows, kVecs vectors from column ow0 of each, of one channel. Group g's
// row i reads the band rows from base + (g * kRows + i) * row_step, kernel row r tap_row_step further,
// tap s of output column c at c + tap_offsets[s] there. Each output the FMA chain over the taps in (r, s)
// order from zero, then the channel's steps and the fp16 store at out + (g * kRows + i) * OW + column.
// kS: the taps a row, known at compile time (3), or 0 (S).
template <size_t kRows, size_t kVecs, size_t kS>
__attribute__((target("avx512f,avx512bw,avx512vl,fma,f16c"))) void plane_groups(
    const float* base, size_t row_step, size_t tap_row_step, size_t groups, const size_t* tap_offsets, size_t R,
    size_t S, const float* w, const ChannelStep* steps, size_t n_steps, uint16_t* out, size_t OW, size_t ow0) {
  constexpr size_t V = kRows * kVecs;
  const size_t taps = kS ? kS : S;
  __mmask16 masks[kVecs];
  for (size_t j = 0; j < kVecs; ++j) masks[j] = first16(OW - ow0 - kLanes * j);
  base += ow0, out += ow0;
  for (size_t gi = 0; gi < groups; ++gi, base += kRows * row_step, out += kRows * OW) {
    __m512 acc[V];
#pragma GCC unroll 8
    for (size_t a = 0; a < V; ++a) acc[a] = _mm512_setzero_ps();
    const float* wr = w;
    const float* row = base;
    for (size_t r = 0; r < R; ++r, row += tap_row_step) {
#pragma GCC unroll 3
      for (size_t s = 0; s < taps; ++s, ++wr) {
        const __m512 wv = _mm512_set1_ps(*wr);
        size_t off = tap_offsets[s];
        // Opaque to the optimiser: otherwise GCC precomputes every (tap, vector) offset and runs out of
        // registers (a third of the loop was moves from xmm registers); as it is, each load is
        // row + i * row_step + off + a constant.
        asm("" : "+r"(off));
        const float* at = row + off;
#pragma GCC unroll 8
        for (size_t i = 0; i < kRows; ++i, at += row_step)
#pragma GCC unroll 8
          for (size_t j = 0; j < kVecs; ++j)
            acc[i * kVecs + j] = _mm512_fmadd_ps(_mm512_loadu_ps(at + kLanes * j), wv, acc[i * kVecs + j]);
      }
    }
    apply_steps(steps, n_steps, acc);
#pragma GCC unroll 8
    for (size_t i = 0; i < kRows; ++i)
#pragma GCC unroll 8
      for (size_t j = 0; j < kVecs; ++j) store_halves_avx512(acc[i * kVecs + j], out + i * OW + kLanes * j, masks[j]);
  }
}

using PlaneGroupsFn = void (*)(const float*, size_t, size_t, size_t, const size_t*, size_t, size_t, const float*,
                               const ChannelStep*, size_t, uint16_t*, size_t, size_t);

// The kernel for groups of `rows` rows of `vecs` vectors (rows * vecs <= kMaxVecs): a table over every
// such shape.
template <size_t kS>
struct PlaneGroupsTable {
  PlaneGroupsFn fns[kMaxVecs + 1][kMaxVecs + 1] = {};
  template <size_t kRows, size_t... kVecs>
  constexpr void row(std::index_sequence<kVecs...>) {
    ((fns[kRows][kVecs + 1] = (kRows * (kVecs + 1) <= kMaxVecs) ? plane_groups<kRows, kVecs + 1, kS> : nullptr), ...);
  }
  template <size_t... kRows>
  constexpr PlaneGroupsTable(std::index_sequence<kRows...>) {
    (row<kRows + 1>(std::make_index_sequence<kMaxVecs>{}), ...);
  }
};

PlaneGroupsFn plane_groups_for(size_t rows, size_t vecs, size_t S) {
  static const PlaneGroupsTable<3> taps3(std::make_index_sequence<kMaxVecs>{});
  static const PlaneGroupsTable<0> any(std::make_index_sequence<kMaxVecs>{});
  return S == 3 ? taps3.fns[rows][vecs] : any.fns[rows][vecs];
}
#endif

}  // namespace

bool DepthwiseF16Planes::applies(Isa isa, const DepthwiseGeometry& g) {
  if (!has_avx512(isa) || g.sw > 2) return false;  // never AVX-512 where SOFTDLA_X86 is not defined
  switch (dw_f16_choice()) {
    case DwF16Choice::kPlanes: return true;
    case DwF16Choice::kBlocks: return false;
    default: return g.sw == 1 && g.OW >= kMinColumns;
  }
}

DepthwiseF16Planes::DepthwiseF16Planes(const DepthwiseGeometry& g, uint32_t channels, const float* weights,
                                       std::vector<ChannelStep> steps)
    : g_(g), channels_(channels), taps_(size_t(g.R) * g.S), steps_(std::move(steps)) {
  n_steps_ = channels ? steps_.size() / channels : 0;
  weights_.assign(weights, weights + size_t(channels) * taps_);
  vecs_ = (size_t(g.OW) + kLanes - 1) / kLanes;
  // Tap s of output column c reads padded column c * sw + s * dw: phase (s * dw) % sw, index c + s * dw / sw.
  // A phase holds the widened columns and what the last vector's farthest tap reads (zeros past the row).
  const size_t reach = size_t(g.S - 1) * g.dw / g.sw;
  phase_len_ = round_up(std::max(vecs_ * kLanes + reach, (size_t(g.pl) + g.W + g.sw - 1) / g.sw), kLanes);
  row_floats_ = size_t(g.sw) * phase_len_;
  for (uint32_t s = 0; s < g.S; ++s) tap_offsets_.push_back((size_t(s) * g.dw % g.sw) * phase_len_ + size_t(s) * g.dw / g.sw);
  // Eight output vectors at a time: several short rows, or up to eight vectors of one long row.
  group_rows_ = std::min<size_t>(g.OH, std::max<size_t>(1, kMaxVecs / vecs_));
  chunk_vecs_ = std::min(vecs_, kMaxVecs / group_rows_);
  // Bands of output rows whose widened input rows fit in about half of L1 (whole groups; at least one).
  const size_t halo = size_t(g.R - 1) * g.dh + 1, fit = kBandBytes / (row_floats_ * sizeof(float));
  const size_t rows = fit > halo ? (fit - halo) / g.sh + 1 : 1;
  band_rows_ = std::min<size_t>(g.OH, std::max(group_rows_, rows / group_rows_ * group_rows_));
  band_in_rows_ = (band_rows_ - 1) * g.sh + halo;
}

DepthwiseF16Planes::Bands DepthwiseF16Planes::bands(size_t threads) const {
  size_t rows = band_rows_;
  // Fewer bands than threads: thinner ones, of whole groups (each costs its halo's rows widened again).
  if ((g_.OH + rows - 1) / rows < threads && g_.OH >= threads * group_rows_)
    rows = round_up((g_.OH + threads - 1) / threads, group_rows_);
  return {rows, (g_.OH + rows - 1) / rows};
}

void DepthwiseF16Planes::run(const uint16_t* x, uint16_t* y, size_t threads, size_t begin, size_t end) const {
#ifdef SOFTDLA_X86
  thread_local PlaneScratch scratch;
  const DepthwiseGeometry& g = g_;
  const size_t in_plane = size_t(g.H) * g.W, out_plane = size_t(g.OH) * g.OW;
  const size_t row_step = g.sh * row_floats_, tap_row_step = g.dh * row_floats_;
  // Every unit of the call shares the band's layout: its padding columns are zeroed once here and never
  // written (rows are widened into their valid columns only). Padded column pl of each row on a 64-byte
  // boundary, so that a stride-1 row is widened with aligned stores.
  float* band = scratch.zeroed(band_in_rows_ * row_floats_, (kLanes - g.pl % kLanes) % kLanes);
  const Bands b = bands(threads);
  for (size_t unit = begin; unit < end; ++unit) {
    const size_t n = unit / (b.count * channels_), k = unit % channels_;
    const uint16_t* xp = x + (n * channels_ + k) * in_plane;
    uint16_t* yp = y + (n * channels_ + k) * out_plane;
    const float* w = weights_.data() + k * taps_;
    const ChannelStep* steps = steps_.data() + k * n_steps_;
    const size_t oh0 = (unit / channels_ % b.count) * b.rows;
    const size_t rows = std::min<size_t>(b.rows, g.OH - oh0);
    const size_t in_rows = (rows - 1) * g.sh + size_t(g.R - 1) * g.dh + 1;
    // The band's input rows; rows above or below the input are zeros.
    for (size_t t = 0; t < in_rows; ++t) {
      const int64_t ih = int64_t(oh0 * g.sh + t) - g.pt;
      float* row = band + t * row_floats_;
      if (ih < 0 || ih >= int64_t(g.H)) std::fill_n(row, row_floats_, 0.f);
      else if (g.sw == 1) widen_row_s1(xp + size_t(ih) * g.W, g.W, row + g.pl);
      else widen_row_s2(xp + size_t(ih) * g.W, g.W, g.pl, row, phase_len_);
    }
    // Whole groups, then the band's last rows as one shorter group; each in chunks of columns.
    const size_t groups = rows / group_rows_, last = rows % group_rows_;
    uint16_t* out = yp + oh0 * g.OW;
    for (size_t j = 0; j < vecs_; j += chunk_vecs_) {
      const size_t v = std::min(chunk_vecs_, vecs_ - j);
      if (groups)
        plane_groups_for(group_rows_, v, g.S)(band, row_step, tap_row_step, groups, tap_offsets_.data(), g.R,
                                              g.S, w, steps, n_steps_, out, g.OW, j * kLanes);
      if (last)
        plane_groups_for(last, v, g.S)(band + groups * group_rows_ * row_step, row_step, tap_row_step, 1,
                                       tap_offsets_.data(), g.R, g.S, w, steps, n_steps_,
                                       out + groups * group_rows_ * g.OW, g.OW, j * kLanes);
    }
  }
#else
  (void)x, (void)y, (void)threads, (void)begin, (void)end;
#endif
}

}  // namespace softdla::cpu
