#include "depthwise_s8_vnni.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "x86_simd.h"

namespace softdla::cpu {

#ifdef SOFTDLA_X86
namespace {

constexpr size_t kBlock = 16;  // output columns per vector: one int32 lane each
constexpr uint32_t kMaxTapGroups = 16;  // groups of 4 taps along a kernel row (64 bytes hold at most 13)

// Input row ih of a block's columns as unsigned bytes (x + 128), padding lanes and rows the padding code
// 128. A padding row loads nothing (mask 0, at the plane itself). Integer addresses: the masked-off lanes
// may lie before the plane, where no pointer may point.
__attribute__((target("avx512f,avx512bw"), always_inline)) inline __m512i offset_row(uintptr_t plane, int64_t ih,
                                                                                    int64_t H, int64_t W,
                                                                                    int64_t column, uint64_t mask) {
  const bool inside = ih >= 0 && ih < H;
  const uintptr_t at = plane + uintptr_t(ih * W + column);
  return _mm512_xor_si512(_mm512_maskz_loadu_epi8(inside ? mask : 0, reinterpret_cast<const void*>(inside ? at : plane)),
                          _mm512_set1_epi8(char(0x80)));
}

// Every output row of the plane, 16 columns per step, for the kernels without a column kernel: per
// kernel row, one masked load and per group of taps one permute and one vpdpbusd.
__attribute__((target("avx512f,avx512bw,avx512vnni,avx512vbmi"))) void rows(
    const DepthwiseGeometry& geometry, const int8_t* x, const int64_t* block_offset, const uint64_t* block_mask,
    const __m512i* index, const __m512i* weight, __m512i start, int32_t* out) {
  // A copy: the int32 stores to out may alias the geometry's fields as far as the compiler knows, and
  // would make it reload them after every vector.
  const DepthwiseGeometry g = geometry;
  const uint32_t R = g.R, G = (g.S + 3) / 4;
  const uintptr_t plane = reinterpret_cast<uintptr_t>(x);
  for (uint32_t oh = 0; oh < g.OH; ++oh) {
    int32_t* dst = out + size_t(oh) * g.OW;
    for (uint32_t ow = 0, b = 0; ow < g.OW; ow += kBlock, ++b) {
      __m512i acc = start;
      for (uint32_t r = 0; r < R; ++r) {
        const int64_t ih = int64_t(oh) * g.sh + int64_t(r) * g.dh - g.pt;
        const __m512i bytes = offset_row(plane, ih, g.H, g.W, block_offset[b], block_mask[b]);
        for (uint32_t q = 0; q < G; ++q)
          acc = _mm512_dpbusd_epi32(acc, _mm512_permutexvar_epi8(index[q], bytes), weight[r * G + q]);
      }
      // Whole vectors: lanes past the row's end land on the next row's first outputs, which its own
      // store then writes (rows go in order), or on the buffer's slack after the last row.
      _mm512_storeu_si512(dst + ow, acc);
    }
  }
}

// What a column kernel reads: one block's input rows and the channel's vectors, the rows in a ring of
// kR registers where input row i (counting from the first the block reads) lives in slot i % kR.
template <uint32_t kR, uint32_t kG>
struct ColumnState {
  uintptr_t plane;
  int64_t H, W, column, next;  // next: the input row to load next
  uint64_t mask;
  __m512i ring[kR], idx[kG], wt[kR * kG], start;
};

// Output row oh of a block, with J = oh % kR known at compile time: its first input row oh * kSh is in
// slot (J * kSh) % kR, so every ring index below is a constant and the ring stays in registers (a ring
// rotated by moves, or indexed at run time, went through the stack).
template <uint32_t kR, uint32_t kG, uint32_t kSh, uint32_t J>
__attribute__((target("avx512f,avx512bw,avx512vnni,avx512vbmi"), always_inline)) inline void column_row(
    ColumnState<kR, kG>& s, int32_t* dst) {
  constexpr uint32_t first = (J * kSh) % kR;
#pragma GCC unroll 8
  for (uint32_t t = 0; t < kSh; ++t)
    s.ring[(first + kR - kSh + t) % kR] = offset_row(s.plane, s.next++, s.H, s.W, s.column, s.mask);
  __m512i acc = s.start;
#pragma GCC unroll 8
  for (uint32_t r = 0; r < kR; ++r)
#pragma GCC unroll 4
    for (uint32_t q = 0; q < kG; ++q)
      acc = _mm512_dpbusd_epi32(acc, _mm512_permutexvar_epi8(s.idx[q], s.ring[(first + r) % kR]), s.wt[r * kG + q]);
  _mm512_storeu_si512(dst, acc);
}

// The common kernels (kR rows of kG tap groups, row stride kSh, no row dilation) column by column: a
// block of 16 output columns walks down the plane with the kR input rows it reads kept in registers,
// loading kSh new rows per output row. Blocks go right to left, so a row's last block, which stores a
// whole vector past the row's end, is overwritten by the next row's first block.
template <uint32_t kR, uint32_t kG, uint32_t kSh, size_t... J>
__attribute__((target("avx512f,avx512bw,avx512vnni,avx512vbmi"), always_inline)) inline void column_blocks(
    const DepthwiseGeometry& geometry, const int8_t* x, const int64_t* block_offset, const uint64_t* block_mask,
    const __m512i* index, const __m512i* weight, __m512i start, int32_t* out, std::index_sequence<J...>) {
  const DepthwiseGeometry g = geometry;  // a copy: the compiler may not assume out's stores leave it alone
  ColumnState<kR, kG> s;
  s.plane = reinterpret_cast<uintptr_t>(x);
  s.H = g.H;
  s.W = g.W;
  s.start = start;
#pragma GCC unroll 4
  for (uint32_t q = 0; q < kG; ++q) s.idx[q] = index[q];
#pragma GCC unroll 16
  for (uint32_t i = 0; i < kR * kG; ++i) s.wt[i] = weight[i];
  for (uint32_t b = (g.OW + kBlock - 1) / kBlock; b-- > 0;) {
    s.column = block_offset[b];
    s.mask = block_mask[b];
    s.next = -int64_t(g.pt);
#pragma GCC unroll 8
    for (uint32_t r = 0; r + kSh < kR; ++r) s.ring[r] = offset_row(s.plane, s.next++, s.H, s.W, s.column, s.mask);
    int32_t* dst = out + size_t(b) * kBlock;
    // kR output rows per trip, each with its ring slots fixed; the last trip stops at the plane's end.
    for (uint32_t oh = 0; oh < g.OH; oh += kR)
      (void)((oh + J < g.OH && (column_row<kR, kG, kSh, J>(s, dst + size_t(oh + J) * g.OW), true)) && ...);
  }
}

template <uint32_t kR, uint32_t kG, uint32_t kSh>
__attribute__((target("avx512f,avx512bw,avx512vnni,avx512vbmi"))) void columns(
    const DepthwiseGeometry& g, const int8_t* x, const int64_t* block_offset, const uint64_t* block_mask,
    const __m512i* index, const __m512i* weight, __m512i start, int32_t* out) {
  column_blocks<kR, kG, kSh>(g, x, block_offset, block_mask, index, weight, start, out, std::make_index_sequence<kR>{});
}

}  // namespace

bool DepthwiseS8Vnni::applies(Isa isa, const DepthwiseGeometry& g) {
  // Each group of 4 taps of a kernel row is gathered with one byte permute of a 64-byte load: the
  // 16 outputs' farthest tap must lie within it.
  return has_avx512(isa) && cpu_has_avx512_vbmi() && (kBlock - 1) * g.sw + size_t(g.S - 1) * g.dw <= 63 &&
         (g.S + 3) / 4 <= kMaxTapGroups && g.R * ((g.S + 3) / 4) <= kMaxDepthwiseVnniSteps;
}

DepthwiseS8Vnni::DepthwiseS8Vnni(const DepthwiseGeometry& g, const int8_t* weights, size_t channels)
    : g_(g), groups_((g.S + 3) / 4) {
  // Block b's load starts at padded column 16 * b * sw, input column 16 * b * sw - pl; lane i holds an
  // input column when 0 <= that + i < W.
  for (uint32_t ow = 0; ow < g.OW; ow += kBlock) {
    const int64_t first = int64_t(ow) * g.sw - g.pl;
    const int64_t lo = std::max<int64_t>(0, -first), hi = std::min<int64_t>(64, int64_t(g.W) - first);
    uint64_t mask = 0;
    for (int64_t i = lo; i < hi; ++i) mask |= uint64_t(1) << i;
    block_offset_.push_back(first);
    block_mask_.push_back(mask);
  }
  // Per group q of 4 taps: the byte permute that gathers, for each output lane i, the bytes of taps
  // 4q..4q+3 (at i * sw + s * dw from the block's first column), and those taps' weights as one dword
  // (0 past the kernel's width, so the byte gathered there is ignored).
  index_.assign(size_t(groups_) * 64, 0);
  for (uint32_t q = 0; q < groups_; ++q)
    for (uint32_t i = 0; i < kBlock; ++i)
      for (uint32_t b = 0; b < 4; ++b) {
        const uint32_t s = 4 * q + b;
        index_[q * 64 + 4 * i + b] = uint8_t(s < g.S ? i * g.sw + s * g.dw : 0);
      }
  const size_t steps = size_t(g.R) * groups_, taps = size_t(g.R) * g.S;
  weights_.assign(channels * steps, 0);
  start_.assign(channels, 0);
  for (size_t k = 0; k < channels; ++k) {
    const int8_t* w = weights + k * taps;
    int32_t sum = 0;
    for (uint32_t r = 0; r < g.R; ++r)
      for (uint32_t q = 0; q < groups_; ++q) {
        uint32_t packed = 0;
        for (uint32_t b = 0; b < 4; ++b) {
          const uint32_t s = 4 * q + b;
          const int8_t v = s < g.S ? w[r * g.S + s] : 0;
          sum += v;
          packed |= uint32_t(uint8_t(v)) << (8 * b);
        }
        weights_[k * steps + r * groups_ + q] = int32_t(packed);
      }
    start_[k] = -128 * sum;
  }
}

__attribute__((target("avx512f,avx512bw,avx512vnni,avx512vbmi"))) void DepthwiseS8Vnni::run(
    size_t k, const int8_t* x, int32_t* out) const {
  __m512i index[kMaxTapGroups], weight[kMaxDepthwiseVnniSteps];
  for (uint32_t q = 0; q < groups_; ++q) index[q] = _mm512_loadu_si512(index_.data() + q * 64);
  const size_t steps = size_t(g_.R) * groups_;
  for (size_t i = 0; i < steps; ++i) weight[i] = _mm512_set1_epi32(weights_[k * steps + i]);
  const __m512i start = _mm512_set1_epi32(start_[k]);
  // The common kernels with their loops unrolled and their weights and input rows in registers; any
  // other fitting one row by row through loops with run-time bounds.
  const int64_t* offsets = block_offset_.data();
  const uint64_t* masks = block_mask_.data();
  if (g_.dh == 1 && (g_.sh == 1 || g_.sh == 2)) {
    const bool unit = g_.sh == 1;
    if (g_.R == 3 && groups_ == 1)
      return (unit ? columns<3, 1, 1> : columns<3, 1, 2>)(g_, x, offsets, masks, index, weight, start, out);
    if (g_.R == 5 && groups_ == 2)
      return (unit ? columns<5, 2, 1> : columns<5, 2, 2>)(g_, x, offsets, masks, index, weight, start, out);
    if (g_.R == 7 && groups_ == 2)
      return (unit ? columns<7, 2, 1> : columns<7, 2, 2>)(g_, x, offsets, masks, index, weight, start, out);
  }
  rows(g_, x, offsets, masks, index, weight, start, out);
}
#else
bool DepthwiseS8Vnni::applies(Isa, const DepthwiseGeometry&) { return false; }
DepthwiseS8Vnni::DepthwiseS8Vnni(const DepthwiseGeometry& g, const int8_t*, size_t) : g_(g) {}
void DepthwiseS8Vnni::run(size_t, const int8_t*, int32_t*) const {}
#endif

}  // namespace softdla::cpu
