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

// The plane as unsigned bytes (x + 128), zero-padded (128) on every side so that each vector load of
// an output block reads 64 in-bounds bytes. vpdpbusd multiplies unsigned by signed bytes, so the
// activations take the +128 offset and the sum is corrected by -128 * (sum of the weights) once.
struct OffsetPlane {
  size_t rows = 0, stride = 0;
  std::vector<uint8_t> data;
  const uint8_t* row(size_t i) const { return data.data() + i * stride; }
};

__attribute__((target("avx512f,avx512bw"))) void build_offset_plane(const DepthwiseGeometry& g, const int8_t* x,
                                                                    OffsetPlane& p) {
  p.rows = size_t(g.OH - 1) * g.sh + size_t(g.R - 1) * g.dh + 1;
  const size_t blocks = (g.OW + kBlock - 1) / kBlock;
  p.stride = ((blocks - 1) * kBlock * g.sw + 64 + 63) / 64 * 64;
  p.data.resize(p.rows * p.stride);
  std::memset(p.data.data(), 0x80, p.data.size());
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
    for (size_t j = 0; j < n; j += 64) {
      const __mmask64 m = n - j >= 64 ? ~__mmask64(0) : (__mmask64(1) << (n - j)) - 1;
      _mm512_mask_storeu_epi8(dst + j, m, _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, src + j), offset));
    }
  }
}

// Every output row of the plane, 16 columns per step: per kernel row, one load and per group of taps
// one permute and one vpdpbusd. kR, kG: the kernel's rows and tap groups when known at compile time
// (0: read from g).
template <uint32_t kR, uint32_t kG>
__attribute__((target("avx512f,avx512bw,avx512vnni,avx512vbmi"))) void rows(const DepthwiseGeometry& g,
                                                                             const OffsetPlane& plane,
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
      const __mmask16 m = g.OW - ow >= kBlock ? __mmask16(0xFFFF) : __mmask16((1u << (g.OW - ow)) - 1);
      _mm512_mask_storeu_epi32(dst + ow, m, acc);
    }
  }
}

}  // namespace

bool depthwise_s8_vnni_fits(const DepthwiseGeometry& g) {
  // Each group of 4 taps of a kernel row is gathered with one byte permute of a 64-byte load: the
  // 16 outputs' farthest tap must lie within it.
  return (kBlock - 1) * g.sw + size_t(g.S - 1) * g.dw <= 63 && (g.S + 3) / 4 <= kMaxTapGroups &&
         g.R * ((g.S + 3) / 4) <= kMaxDepthwiseVnniSteps;
}

__attribute__((target("avx512f,avx512bw,avx512vnni,avx512vbmi"))) void depthwise_s8_plane_vnni(
    const DepthwiseGeometry& g, const int8_t* x, const int8_t* w, int32_t* out, bool same_input) {
  thread_local OffsetPlane plane;
  if (!same_input || plane.data.empty()) build_offset_plane(g, x, plane);
  // Per kernel row r and group q of 4 taps: the byte permute that gathers, for each output lane i,
  // the bytes of taps 4q..4q+3 (at i * sw + s * dw from the block's first column), and those taps'
  // weights as one broadcast dword (0 past the kernel's width, so the byte gathered there is ignored).
  const uint32_t groups = (g.S + 3) / 4;
  __m512i index[kMaxTapGroups], weight[kMaxDepthwiseVnniSteps];
  int32_t weight_sum = 0;
  for (uint32_t q = 0; q < groups; ++q) {
    alignas(64) uint8_t idx[64];
    for (uint32_t i = 0; i < kBlock; ++i)
      for (uint32_t b = 0; b < 4; ++b) {
        const uint32_t s = 4 * q + b;
        idx[4 * i + b] = uint8_t(s < g.S ? i * g.sw + s * g.dw : 0);
      }
    index[q] = _mm512_load_si512(idx);
  }
  for (uint32_t r = 0; r < g.R; ++r)
    for (uint32_t q = 0; q < groups; ++q) {
      uint32_t packed = 0;
      for (uint32_t b = 0; b < 4; ++b) {
        const uint32_t s = 4 * q + b;
        const int8_t v = s < g.S ? w[r * g.S + s] : 0;
        weight_sum += v;
        packed |= uint32_t(uint8_t(v)) << (8 * b);
      }
      weight[r * groups + q] = _mm512_set1_epi32(int32_t(packed));
    }
  const __m512i start = _mm512_set1_epi32(-128 * weight_sum);
  // The common kernels with their loops unrolled and their weights in registers; any other fitting one
  // through the same loop with run-time bounds.
  if (g.R == 3 && groups == 1) return rows<3, 1>(g, plane, index, weight, start, out);
  if (g.R == 5 && groups == 2) return rows<5, 2>(g, plane, index, weight, start, out);
  if (g.R == 7 && groups == 2) return rows<7, 2>(g, plane, index, weight, start, out);
  rows<0, 0>(g, plane, index, weight, start, out);
}
#else
bool depthwise_s8_vnni_fits(const DepthwiseGeometry&) { return false; }
void depthwise_s8_plane_vnni(const DepthwiseGeometry&, const int8_t*, const int8_t*, int32_t*, bool) {}
#endif

}  // namespace softdla::cpu
