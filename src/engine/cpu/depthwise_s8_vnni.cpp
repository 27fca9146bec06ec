#include "depthwise_s8_vnni.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "x86_simd.h"

namespace softdla::cpu {

#ifdef SOFTDLA_X86
namespace {

constexpr size_t kBlock = 16;  // output columns per vector: one int32 lane each
constexpr uint32_t kMaxTapGroups = 16;  // groups of 4 taps along a kernel row (64 bytes hold at most 13)

__attribute__((target("avx512f,avx512bw"))) void build_offset_plane(const DepthwiseGeometry& g, const int8_t* x,
                                                                    DepthwiseVnniPlane& p) {
  p.rows = size_t(g.OH - 1) * g.sh + size_t(g.R - 1) * g.dh + 1;
  const size_t blocks = (g.OW + kBlock - 1) / kBlock;
  p.stride = ((blocks - 1) * kBlock * g.sw + 64 + 63) / 64 * 64;
  const auto same = [](const DepthwiseGeometry& a, const DepthwiseGeometry& b) {
    return std::memcmp(&a, &b, sizeof(DepthwiseGeometry)) == 0;
  };
  if (!same(p.padded_for, g) || p.data.size() != p.rows * p.stride + 64) {
    p.data.assign(p.rows * p.stride + 64, 0x80);  // slack: the last row's store is a whole vector
    p.padded_for = g;
  }
  const __m512i offset = _mm512_set1_epi8(char(0x80));
  for (size_t i = 0; i < p.rows; ++i) {
    const int64_t ih = int64_t(i) - g.pt;
    if (ih < 0 || ih >= g.H) continue;
    // Input columns [c0, c1) land at padded columns [c0 + pl, c1 + pl) that lie inside the row.
    const int64_t c0 = std::max<int64_t>(0, -int64_t(g.pl));
    const int64_t c1 = std::min<int64_t>(g.W, int64_t(p.stride) - g.pl);
    if (c1 <= c0) continue;
    const int8_t* src = x + size_t(ih) * g.W + c0;
    uint8_t* dst = p.data.data() + i * p.stride + size_t(c0 + g.pl);
    const size_t n = size_t(c1 - c0);
    // Whole 64-byte stores (masked byte stores are slow on AMD Zen): the bytes past the row's input
    // columns are loaded as zeros and so stored as the padding code 0x80, and what spills into the next
    // row lands on its left padding or on columns it writes itself afterwards (rows go in order).
    for (size_t j = 0; j < n; j += 64) {
      const __mmask64 m = n - j >= 64 ? ~__mmask64(0) : (__mmask64(1) << (n - j)) - 1;
      _mm512_storeu_si512(dst + j, _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, src + j), offset));
    }
  }
}

// Every output row of the plane, 16 columns per step: per kernel row, one load and per group of taps
// one permute and one vpdpbusd. kR, kG: the kernel's rows and tap groups when known at compile time
// (0: read from g).
template <uint32_t kR, uint32_t kG>
__attribute__((target("avx512f,avx512bw,avx512vnni,avx512vbmi"))) void rows(const DepthwiseGeometry& g,
                                                                             const DepthwiseVnniPlane& plane,
                                                                             const __m512i* index, const __m512i* weight,
                                                                             __m512i start, int32_t* out) {
  const uint32_t R = kR ? kR : g.R, G = kG ? kG : (g.S + 3) / 4;
  for (uint32_t oh = 0; oh < g.OH; ++oh) {
    const uint8_t* top = plane.row(size_t(oh) * g.sh);
    const size_t row_step = size_t(g.dh) * plane.stride;
    int32_t* dst = out + size_t(oh) * g.OW;
    for (uint32_t ow = 0; ow < g.OW; ow += kBlock) {
      __m512i acc = start;
      const uint8_t* src = top + size_t(ow) * g.sw;
      for (uint32_t r = 0; r < R; ++r) {
        const __m512i bytes = _mm512_loadu_si512(src + r * row_step);
        for (uint32_t q = 0; q < G; ++q)
          acc = _mm512_dpbusd_epi32(acc, _mm512_permutexvar_epi8(index[q], bytes), weight[r * G + q]);
      }
      // Whole vectors: lanes past the row's end land on the next row's first outputs, which its own
      // store then writes (rows go in order), or on the buffer's slack after the last row.
      _mm512_storeu_si512(dst + ow, acc);
    }
  }
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
    size_t k, const int8_t* x, int32_t* out, DepthwiseVnniPlane& plane, bool same_input) const {
  if (!same_input || plane.data.empty()) build_offset_plane(g_, x, plane);
  __m512i index[kMaxTapGroups], weight[kMaxDepthwiseVnniSteps];
  for (uint32_t q = 0; q < groups_; ++q) index[q] = _mm512_loadu_si512(index_.data() + q * 64);
  const size_t steps = size_t(g_.R) * groups_;
  for (size_t i = 0; i < steps; ++i) weight[i] = _mm512_set1_epi32(weights_[k * steps + i]);
  const __m512i start = _mm512_set1_epi32(start_[k]);
  // The common kernels with their loops unrolled and their weights in registers; any other fitting one
  // through the same loop with run-time bounds.
  if (g_.R == 3 && groups_ == 1) return rows<3, 1>(g_, plane, index, weight, start, out);
  if (g_.R == 5 && groups_ == 2) return rows<5, 2>(g_, plane, index, weight, start, out);
  if (g_.R == 7 && groups_ == 2) return rows<7, 2>(g_, plane, index, weight, start, out);
  rows<0, 0>(g_, plane, index, weight, start, out);
}
#else
bool DepthwiseS8Vnni::applies(Isa, const DepthwiseGeometry&) { return false; }
DepthwiseS8Vnni::DepthwiseS8Vnni(const DepthwiseGeometry& g, const int8_t*, size_t) : g_(g) {}
void DepthwiseS8Vnni::run(size_t, const int8_t*, int32_t*, DepthwiseVnniPlane&, bool) const {}
#endif

}  // namespace softdla::cpu
