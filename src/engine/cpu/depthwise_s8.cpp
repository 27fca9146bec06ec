#include "depthwise_s8.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "half_convert.h"
#include "half_convert_avx512.h"
#include "multiversion.h"
#include "numerics.h"
#include "x86_simd.h"

namespace softdla::cpu {
namespace {
constexpr size_t kLanes = 16;  // the widest vector; rows are padded to whole vectors of it
}  // namespace

SOFTDLA_MULTIVERSION
int32_t dot_s8(const int8_t* x, const int8_t* w, size_t n) {
  int32_t sum = 0;
  for (size_t i = 0; i < n; ++i) sum += int32_t(x[i]) * w[i];
  return sum;
}

namespace depthwise_detail {
// The plane as padded fp32 rows split by column phase: phase p of padded row i holds padded columns
// p, p + sw, p + 2 sw, ... Output column ow of tap s then reads phase (s dw) % sw at ow + (s dw) / sw.
struct PhasedPlane {
  size_t rows = 0, stride = 0;  // padded rows; floats per phase row (a multiple of kLanes)
  uint32_t phases = 1;
  std::vector<float> data;      // [row][phase][stride]
  const float* at(size_t row, uint32_t phase) const { return data.data() + (row * phases + phase) * stride; }
};

struct Tap {
  size_t row_offset;  // r * dh
  uint32_t phase;
  size_t column;      // (s * dw) / sw
  float weight;
};

}  // namespace depthwise_detail

// What the kernels below reuse from plane to plane, one per thread.
struct DepthwiseScratch {
  depthwise_detail::PhasedPlane plane;
  std::vector<depthwise_detail::Tap> taps;
  std::vector<size_t> first, past;      // build_phased: each phase's columns inside the input
  std::vector<const float*> src;        // rows_avx512: each tap's row
  std::vector<float> weights;           // rows_avx512: each tap's weight
};

DepthwiseScratch& depthwise_scratch() {
  thread_local DepthwiseScratch scratch;
  return scratch;
}

namespace {
using depthwise_detail::PhasedPlane;
using depthwise_detail::Tap;

void widen_portable(const int8_t* src, size_t stride, size_t n, float* dst) {
  for (size_t i = 0; i < n; ++i) dst[i] = float(src[i * stride]);
}

#ifdef SOFTDLA_X86
// 16 values per step: the next 16 bytes, or (stride 2) the even bytes of the next 32, picked with SSE2
// as 16-bit lanes' low bytes. A stride-2 step reads one byte past its last value, so it stops a step early.
__attribute__((target("avx512f"))) void widen_avx512(const int8_t* src, size_t stride, size_t n, float* dst) {
  size_t i = 0;
  if (stride == 1) {
    for (; i + 16 <= n; i += 16)
      _mm512_storeu_ps(dst + i, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)))));
  } else if (stride == 2) {
    const __m128i low = _mm_set1_epi16(0x00ff);
    for (; i + 17 <= n; i += 16) {
      const __m128i lo = _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i)), low);
      const __m128i hi = _mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i + 16)), low);
      const __m128i bytes = _mm_packus_epi16(lo, hi);  // the even bytes, as unsigned: the sign comes back below
      _mm512_storeu_ps(dst + i, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(bytes)));
    }
  }
  widen_portable(src + i * stride, stride, n - i, dst + i);
}

// The same eight values a step on AVX2.
__attribute__((target("avx2"))) void widen_avx2(const int8_t* src, size_t stride, size_t n, float* dst) {
  size_t i = 0;
  if (stride == 1) {
    for (; i + 8 <= n; i += 8)
      _mm256_storeu_ps(dst + i, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(src + i)))));
  } else if (stride == 2) {
    const __m128i low = _mm_set1_epi16(0x00ff);
    for (; i + 9 <= n; i += 8) {  // reads 16 bytes: one past the 8th value
      const __m128i even = _mm_packus_epi16(_mm_and_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + 2 * i)), low),
                                            _mm_setzero_si128());
      _mm256_storeu_ps(dst + i, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(even)));
    }
  }
  widen_portable(src + i * stride, stride, n - i, dst + i);
}
#endif

void widen_strided(Isa isa, const int8_t* src, size_t stride, size_t n, float* dst) {
#ifdef SOFTDLA_X86
  if (has_avx512(isa)) return widen_avx512(src, stride, n, dst);
  if (isa >= Isa::kAvx2) return widen_avx2(src, stride, n, dst);
#endif
  (void)isa;
  widen_portable(src, stride, n, dst);
}

#ifdef SOFTDLA_X86
// Stride 2 on AVX-512: the even elements of the next 32, as the low halves of 16 dwords (fp16) or by a
// two-register permute (fp32); the last step reads no further than the run's last value.
__attribute__((target("avx512f,avx512bw,avx512vl,f16c"))) size_t widen_even_halves_avx512(const uint16_t* src, size_t n,
                                                                                          float* dst) {
  for (size_t i = 0; i < n; i += 16) {
    const size_t values = std::min<size_t>(16, n - i);
    const __mmask16 store = __mmask16((1u << values) - 1);
    _mm512_mask_storeu_ps(dst + i, store, _mm512_maskz_cvtph_ps(store, even_halves_avx512(src + 2 * i, values)));
  }
  return n;
}
__attribute__((target("avx512f"))) size_t even_floats_avx512(const float* src, size_t n, float* dst) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  size_t i = 0;
  for (; i + 16 < n; i += 16)  // reads 32 values: src[2 i + 31] exists while i + 16 < n
    _mm512_storeu_ps(dst + i, _mm512_permutex2var_ps(_mm512_loadu_ps(src + 2 * i), even, _mm512_loadu_ps(src + 2 * i + 16)));
  return i;
}
#endif

// fp16 and fp32 planes: every stride-th value as fp32 (bulk conversions for stride 1; exact either way).
void widen_strided(Isa isa, const uint16_t* src, size_t stride, size_t n, float* dst) {
  if (stride == 1) return halves_to_floats(isa, src, dst, n);
  size_t i = 0;
#ifdef SOFTDLA_X86
  if (stride == 2 && has_avx512(isa)) i = widen_even_halves_avx512(src, n, dst);
#endif
  for (; i < n; ++i) dst[i] = num::half_to_float(src[i * stride]);
}
void widen_strided(Isa isa, const float* src, size_t stride, size_t n, float* dst) {
  if (stride == 1) return void(std::copy_n(src, n, dst));
  size_t i = 0;
#ifdef SOFTDLA_X86
  if (stride == 2 && has_avx512(isa)) i = even_floats_avx512(src, n, dst);
#endif
  for (; i < n; ++i) dst[i] = src[i * stride];
}

template <class Src>
void build_phased(Isa isa, const DepthwiseGeometry& g, const Src* x, DepthwiseScratch& scratch) {
  PhasedPlane& p = scratch.plane;
  p.rows = size_t(g.OH - 1) * g.sh + size_t(g.R - 1) * g.dh + 1;
  p.phases = g.sw;
  const size_t reach = (size_t(g.S - 1) * g.dw) / g.sw;  // the farthest tap, in phase columns
  // A vector load at output column ow (a multiple of the lanes) reaches ow + lanes - 1 + reach.
  const size_t whole_outputs = (g.OW + kLanes - 1) / kLanes * kLanes;
  p.stride = (whole_outputs + reach + kLanes - 1) / kLanes * kLanes;
  p.data.resize(p.rows * p.phases * p.stride);
  // Per phase, the phase columns [a, b) that lie inside the input (the same for every row): padded
  // column k * sw + ph is input column k * sw + ph - pl.
  std::vector<size_t>&a = scratch.first, &b = scratch.past;
  a.resize(p.phases), b.resize(p.phases);
  for (uint32_t ph = 0; ph < p.phases; ++ph) {
    const int64_t first = int64_t(g.pl) - ph;  // k * sw >= first
    const int64_t k0 = first <= 0 ? 0 : (first + g.sw - 1) / g.sw;
    const int64_t past = int64_t(g.W) + g.pl - ph;  // k * sw < past
    const int64_t k1 = past <= 0 ? 0 : std::min<int64_t>(int64_t(p.stride), (past + g.sw - 1) / g.sw);
    a[ph] = size_t(std::clamp<int64_t>(k0, 0, int64_t(p.stride)));
    b[ph] = size_t(std::clamp<int64_t>(k1, int64_t(a[ph]), int64_t(p.stride)));
  }
  for (size_t i = 0; i < p.rows; ++i) {
    const int64_t ih = int64_t(i) - g.pt;
    float* row = p.data.data() + i * p.phases * p.stride;
    if (ih < 0 || ih >= g.H) {
      std::fill_n(row, p.phases * p.stride, 0.f);
      continue;
    }
    const Src* src = x + size_t(ih) * g.W;
    for (uint32_t ph = 0; ph < p.phases; ++ph) {
      float* dst = row + ph * p.stride;
      std::fill(dst, dst + a[ph], 0.f);
      if (b[ph] > a[ph]) widen_strided(isa, src + (a[ph] * g.sw + ph - g.pl), g.sw, b[ph] - a[ph], dst + a[ph]);
      std::fill(dst + b[ph], dst + p.stride, 0.f);
    }
  }
}

const std::vector<Tap>& taps_of(const DepthwiseGeometry& g, const int8_t* w, std::vector<Tap>& taps) {
  taps.clear();
  for (uint32_t r = 0; r < g.R; ++r)
    for (uint32_t s = 0; s < g.S; ++s)
      taps.push_back({size_t(r) * g.dh, (s * g.dw) % g.sw, (s * g.dw) / g.sw, float(w[r * g.S + s])});
  return taps;
}

// Out: int32 (exact integer sums, truncated from fp32) or float.
template <class Out>
void rows_portable(const DepthwiseGeometry& g, const PhasedPlane& p, const std::vector<Tap>& taps, Out* out) {
  std::vector<float> acc(g.OW);
  for (uint32_t oh = 0; oh < g.OH; ++oh) {
    std::fill(acc.begin(), acc.end(), 0.f);
    for (const Tap& t : taps) {
      const float* src = p.at(size_t(oh) * g.sh + t.row_offset, t.phase) + t.column;
      for (uint32_t ow = 0; ow < g.OW; ++ow) acc[ow] = std::fma(t.weight, src[ow], acc[ow]);  // as the vector FMAs
    }
    for (uint32_t ow = 0; ow < g.OW; ++ow) out[size_t(oh) * g.OW + ow] = Out(acc[ow]);
  }
}

#ifdef SOFTDLA_X86
// kRows output rows x 16 columns from ow: kRows independent FMA chains over the taps (one chain would
// wait on the FMA latency at every tap: MobileNet rows are 7 to 112 wide). src[t] is tap t's source
// for the first row; the next output row reads row_step floats further. Rows are padded to whole
// vectors, so every load is in bounds; the stores take the row's tail under a mask.
template <int kRows, class Out>
__attribute__((target("avx512f"), always_inline)) inline void block_avx512(const float* const* src, size_t src_offset,
                                                                          const float* weights, size_t taps,
                                                                          size_t row_step, size_t ow, __mmask16 m,
                                                                          Out* dst, size_t dst_step) {
  __m512 acc[kRows];
  for (int i = 0; i < kRows; ++i) acc[i] = _mm512_setzero_ps();
  for (size_t t = 0; t < taps; ++t) {
    const __m512 w = _mm512_set1_ps(weights[t]);
    const float* x = src[t] + src_offset + ow;
    for (int i = 0; i < kRows; ++i) acc[i] = _mm512_fmadd_ps(_mm512_loadu_ps(x + i * row_step), w, acc[i]);
  }
  for (int i = 0; i < kRows; ++i) {
    if constexpr (std::is_same_v<Out, float>) _mm512_mask_storeu_ps(dst + i * dst_step + ow, m, acc[i]);
    else _mm512_mask_storeu_epi32(dst + i * dst_step + ow, m, _mm512_cvttps_epi32(acc[i]));  // exact
  }
}

template <class Out>
__attribute__((target("avx512f"))) void rows_avx512(const DepthwiseGeometry& g, const PhasedPlane& p,
                                                    const std::vector<Tap>& taps, Out* out, DepthwiseScratch& scratch) {
  const size_t n = taps.size(), row_step = size_t(g.sh) * p.phases * p.stride;
  std::vector<const float*>& src = scratch.src;
  std::vector<float>& weights = scratch.weights;
  src.resize(n), weights.resize(n);
  for (size_t t = 0; t < n; ++t) weights[t] = taps[t].weight;
  for (uint32_t oh = 0; oh < g.OH; oh += 4) {
    for (size_t t = 0; t < n; ++t) src[t] = p.at(size_t(oh) * g.sh + taps[t].row_offset, taps[t].phase) + taps[t].column;
    Out* dst = out + size_t(oh) * g.OW;
    const uint32_t rows = std::min<uint32_t>(4, g.OH - oh);
    for (uint32_t ow = 0; ow < g.OW; ow += 16) {
      const __mmask16 m = g.OW - ow >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (g.OW - ow)) - 1);
      if (rows == 4) {
        block_avx512<4>(src.data(), 0, weights.data(), n, row_step, ow, m, dst, g.OW);
      } else {  // the last rows, one at a time
        for (uint32_t i = 0; i < rows; ++i)
          block_avx512<1>(src.data(), i * row_step, weights.data(), n, row_step, ow, m, dst + i * g.OW, g.OW);
      }
    }
  }
}

// kRows output rows x 16 columns from ow (two vectors), as block_avx512 does: 2 kRows independent FMA
// chains over the taps, each tap's source pointer (src[t] + src_offset) and weight precomputed. A row's
// last block stores its valid columns through a copy (no store past the row: the next row may be
// written already).
template <int kRows, class Out>
__attribute__((target("avx2,fma"), always_inline)) inline void block_avx2(const float* const* src, size_t src_offset,
                                                                        const float* weights, size_t taps,
                                                                        size_t row_step, size_t ow, size_t valid,
                                                                        Out* dst, size_t dst_step) {
  __m256 acc[kRows][2];
#pragma GCC unroll 2
  for (int i = 0; i < kRows; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  for (size_t t = 0; t < taps; ++t) {
    const __m256 w = _mm256_broadcast_ss(weights + t);
    const float* x = src[t] + src_offset + ow;
#pragma GCC unroll 2
    for (int i = 0; i < kRows; ++i) {
      acc[i][0] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i * row_step), w, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(_mm256_loadu_ps(x + i * row_step + 8), w, acc[i][1]);
    }
  }
#pragma GCC unroll 2
  for (int i = 0; i < kRows; ++i) {
    alignas(32) Out part[16];
    Out* to = valid == 16 ? dst + i * dst_step + ow : part;
    for (int v = 0; v < 2; ++v) {
      if constexpr (std::is_same_v<Out, float>) _mm256_storeu_ps(to + 8 * v, acc[i][v]);
      else _mm256_storeu_si256(reinterpret_cast<__m256i*>(to + 8 * v), _mm256_cvttps_epi32(acc[i][v]));  // exact
    }
    if (to == part) std::copy_n(part, valid, dst + i * dst_step + ow);
  }
}

// Rows wider than 8: blocks of 2 rows x 16 columns.
template <class Out>
__attribute__((target("avx2,fma"))) void wide_rows_avx2(const DepthwiseGeometry& g, const PhasedPlane& p,
                                                        const std::vector<Tap>& taps, Out* out,
                                                        DepthwiseScratch& scratch) {
  const size_t n = taps.size(), row_step = size_t(g.sh) * p.phases * p.stride;
  std::vector<const float*>& src = scratch.src;
  std::vector<float>& weights = scratch.weights;
  src.resize(n), weights.resize(n);
  for (size_t t = 0; t < n; ++t) weights[t] = taps[t].weight;
  for (uint32_t oh = 0; oh < g.OH; oh += 2) {
    for (size_t t = 0; t < n; ++t) src[t] = p.at(size_t(oh) * g.sh + taps[t].row_offset, taps[t].phase) + taps[t].column;
    Out* dst = out + size_t(oh) * g.OW;
    for (uint32_t ow = 0; ow < g.OW; ow += 16) {
      const size_t valid = std::min<size_t>(16, g.OW - ow);
      if (oh + 1 < g.OH) block_avx2<2>(src.data(), 0, weights.data(), n, row_step, ow, valid, dst, g.OW);
      else block_avx2<1>(src.data(), 0, weights.data(), n, row_step, ow, valid, dst, g.OW);
    }
  }
}

// Rows of 8 or fewer (7 x 7 planes): one vector a row, the taps' addresses computed as it goes (a
// plane's setup for the blocks above costs more than its 49 outputs).
template <class Out>
__attribute__((target("avx2,fma"))) void rows_avx2(const DepthwiseGeometry& g, const PhasedPlane& p,
                                                   const std::vector<Tap>& taps, Out* out, DepthwiseScratch& scratch) {
  if (g.OW > 8) return wide_rows_avx2(g, p, taps, out, scratch);
  alignas(32) Out tail[8];
  for (uint32_t oh = 0; oh < g.OH; ++oh) {
    __m256 acc = _mm256_setzero_ps();
    for (const Tap& t : taps)
      acc = _mm256_fmadd_ps(_mm256_loadu_ps(p.at(size_t(oh) * g.sh + t.row_offset, t.phase) + t.column),
                            _mm256_set1_ps(t.weight), acc);
    Out* dst = out + size_t(oh) * g.OW;
    Out* to = g.OW == 8 ? dst : tail;
    if constexpr (std::is_same_v<Out, float>) _mm256_storeu_ps(to, acc);
    else _mm256_storeu_si256(reinterpret_cast<__m256i*>(to), _mm256_cvttps_epi32(acc));
    if (to == tail) std::copy_n(tail, g.OW, dst);
  }
}
#endif

#ifdef SOFTDLA_X86
// sum of x[i] * w[i] over n int8 pairs, exact in int32 (n * 2^14 < 2^31 for every plane a depthwise
// convolution takes): sixteen products a step, pairwise (vpmaddwd) into eight int32 lanes.
__attribute__((target("avx2"))) int32_t dot_s8_avx2(const int8_t* x, const int8_t* w, size_t n) {
  __m256i acc = _mm256_setzero_si256();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i a = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    const __m256i b = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i)));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
  }
  alignas(32) int32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), acc);
  int32_t sum = 0;
  for (int32_t v : lanes) sum += v;
  for (; i < n; ++i) sum += int32_t(x[i]) * w[i];
  return sum;
}
#endif

// A handful of outputs (a global average pool lowered to a depthwise convolution: one output whose
// window is the whole plane): each output as a plain sum, without building the phased plane.
void few_outputs(Isa isa, const DepthwiseGeometry& g, const int8_t* x, const int8_t* w, int32_t* out) {
#ifdef SOFTDLA_X86
  if (isa >= Isa::kAvx2 && g.OH == 1 && g.OW == 1 && g.R == g.H && g.S == g.W && g.pt == 0 && g.pl == 0 && g.dh == 1 &&
      g.dw == 1) {  // the window is the plane: one dot product over contiguous bytes
    out[0] = dot_s8_avx2(x, w, size_t(g.H) * g.W);
    return;
  }
#endif
  (void)isa;
  for (uint32_t oh = 0; oh < g.OH; ++oh)
    for (uint32_t ow = 0; ow < g.OW; ++ow) {
      int32_t sum = 0;
      for (uint32_t r = 0; r < g.R; ++r) {
        const int64_t ih = int64_t(oh) * g.sh - g.pt + int64_t(r) * g.dh;
        if (ih < 0 || ih >= g.H) continue;
        for (uint32_t s = 0; s < g.S; ++s) {
          const int64_t iw = int64_t(ow) * g.sw - g.pl + int64_t(s) * g.dw;
          if (iw >= 0 && iw < g.W) sum += int32_t(x[ih * g.W + iw]) * w[r * g.S + s];
        }
      }
      out[size_t(oh) * g.OW + ow] = sum;
    }
}

}  // namespace

void depthwise_s8_plane(Isa isa, const DepthwiseGeometry& g, const int8_t* x, const int8_t* w, int32_t* out,
                        bool same_input, DepthwiseScratch& scratch) {
  if (size_t(g.OH) * g.OW <= 4) return few_outputs(isa, g, x, w, out);
  PhasedPlane& plane = scratch.plane;
  if (!same_input || plane.data.empty()) build_phased(isa, g, x, scratch);
  const std::vector<Tap>& taps = taps_of(g, w, scratch.taps);
#ifdef SOFTDLA_X86
  if (has_avx512(isa)) return rows_avx512(g, plane, taps, out, scratch);
  if (isa >= Isa::kAvx2) return rows_avx2(g, plane, taps, out, scratch);
#endif
  (void)isa;
  rows_portable(g, plane, taps, out);
}

template <class Src>
void depthwise_float_plane(Isa isa, const DepthwiseGeometry& g, const Src* x, const float* w, float* out,
                           bool same_input, DepthwiseScratch& scratch) {
  PhasedPlane& plane = scratch.plane;
  if (!same_input || plane.data.empty()) build_phased(isa, g, x, scratch);
  std::vector<Tap>& taps = scratch.taps;
  taps.clear();
  for (uint32_t r = 0; r < g.R; ++r)
    for (uint32_t s = 0; s < g.S; ++s)
      taps.push_back({size_t(r) * g.dh, (s * g.dw) % g.sw, (s * g.dw) / g.sw, w[r * g.S + s]});
#ifdef SOFTDLA_X86
  if (has_avx512(isa)) return rows_avx512(g, plane, taps, out, scratch);
  if (isa >= Isa::kAvx2) return rows_avx2(g, plane, taps, out, scratch);
#endif
  rows_portable(g, plane, taps, out);
}

void depthwise_f32_plane(Isa isa, const DepthwiseGeometry& g, const uint16_t* x, const float* w, float* out,
                         bool same_input, DepthwiseScratch& scratch) {
  depthwise_float_plane(isa, g, x, w, out, same_input, scratch);
}
void depthwise_f32_plane(Isa isa, const DepthwiseGeometry& g, const float* x, const float* w, float* out,
                         bool same_input, DepthwiseScratch& scratch) {
  depthwise_float_plane(isa, g, x, w, out, same_input, scratch);
}

}  // namespace softdla::cpu
