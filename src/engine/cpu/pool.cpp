// Max and average pooling. INT8 average uses the Q16 reciprocal rule of the DLA's PDP
// (docs/NUMERICS.md §Pooling); padding is inclusive (Xavier) or excluded (Orin option).
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "cpu_isa.h"
#include "element.h"
#include "half_convert.h"
#include "half_convert_avx512.h"
#include "kernels.h"
#include "multiversion.h"
#include "numerics.h"
#include "prefetch_lines.h"
#include "thread_pool.h"
#include "transpose_avx512.h"
#include "x86_simd.h"

namespace softdla::cpu {
namespace {

// The INT8 average of a window of kw x kh values summing to `sum`: the PDP's Q16 reciprocal of the width,
// then of the height (docs/NUMERICS.md), before the int8 saturation.
inline int64_t q16_average(int64_t sum, unsigned kw, unsigned kh) {
  const int64_t v = num::rshift_rhaz(sum * num::q16_reciprocal(kw), 16);
  return num::rshift_rhaz(v * num::q16_reciprocal(kh), 16);
}

// One int8 plane, separably: for each output row, the window's input rows are reduced column by
// column into `line`, then the windows along the row (both passes contiguous, vectorised). Max and the
// sum of an average are exact either way round.
// line and windows: W values of scratch each (the caller's, once per chunk of planes: a thread_local
// looked up per plane costs more than a 7x7 plane's pooling).
SOFTDLA_MULTIVERSION
void plane_s8(const PoolParams& p, const Shape& in, const Shape& out, const int8_t* x, int8_t* y, size_t pl,
              int32_t* __restrict acc, int32_t* __restrict win) {
  const size_t H = in[2], W = in[3], OH = out[2], OW = out[3];
  const bool max = p.kind == PoolKind::kMax;
  x += pl * H * W;
  y += pl * OH * OW;
  for (size_t oh = 0; oh < OH; ++oh) {
    const int64_t h0 = int64_t(oh * p.stride_h) - p.pad_top;
    const int64_t hb = std::max<int64_t>(h0, 0), he = std::min<int64_t>(h0 + p.kernel_h, H);
    std::fill_n(acc, W, max ? -128 : 0);
    for (int64_t h = hb; h < he; ++h) {
      const int8_t* __restrict row = x + h * W;
      if (max)
        for (size_t w = 0; w < W; ++w) acc[w] = std::max<int32_t>(acc[w], row[w]);
      else
        for (size_t w = 0; w < W; ++w) acc[w] += row[w];
    }
    const unsigned kh = p.exclude_padding ? unsigned(he - hb) : p.kernel_h;
    // Every window that lies inside the row, reduced at once (contiguous, vectorised): windows[w] covers
    // columns [w, w + kernel_w). Outputs whose window sticks out over the padding reduce their own.
    const size_t kw = p.kernel_w, inside = W >= kw ? W - kw + 1 : 0;
    std::copy_n(acc, inside, win);
    for (size_t t = 1; t < kw; ++t) {
      if (max)
        for (size_t w = 0; w < inside; ++w) win[w] = std::max(win[w], acc[w + t]);
      else
        for (size_t w = 0; w < inside; ++w) win[w] += acc[w + t];
    }
    for (size_t ow = 0; ow < OW; ++ow) {
      const int64_t w0 = int64_t(ow * p.stride_w) - p.pad_left;
      const int64_t wb = std::max<int64_t>(w0, 0), we = std::min<int64_t>(w0 + p.kernel_w, W);
      int64_t v = max ? -128 : 0;
      if (w0 >= 0 && size_t(w0) < inside) v = win[w0];
      else
        for (int64_t w = wb; w < we; ++w) v = max ? std::max<int64_t>(v, acc[w]) : v + acc[w];
      if (!max) {
        const unsigned kwu = p.exclude_padding ? unsigned(we - wb) : p.kernel_w;
        v = q16_average(v, kwu, kh);
      }
      y[oh * OW + ow] = num::sat8(v);
    }
  }
}

// An INT8 global average (the window is the whole plane, one output) of planes [b, e) of size hw: each
// plane's exact sum (pool windows are at most 8 x 8, so no sum comes near int32's range), then plane_s8's
// Q16 divisions. A 7x7 plane is a few vector adds here, where plane_s8's row and window passes cost
// several times that (1,280 7x7 planes on one core: 0.060 ms that way, 0.009 ms this way).
SOFTDLA_MULTIVERSION
void global_average_s8(const int8_t* x, int8_t* y, size_t b, size_t e, size_t hw, unsigned kw, unsigned kh) {
  for (size_t pl = b; pl < e; ++pl) {
    const int8_t* __restrict plane = x + pl * hw;
    int32_t sum = 0;
    for (size_t i = 0; i < hw; ++i) sum += plane[i];
    y[pl] = num::sat8(q16_average(sum, kw, kh));
  }
}

// Max pooling of one int8 plane, separably as plane_s8 but on int8 lines (64 values a vector instead
// of 16), and the outputs whose window lies inside the row picked without a per-output test.
SOFTDLA_MULTIVERSION
void max_plane_s8(const PoolParams& p, const Shape& in, const Shape& out, const int8_t* x, int8_t* y, size_t pl,
                  int8_t* __restrict acc, int8_t* __restrict win) {
  const size_t H = in[2], W = in[3], OH = out[2], OW = out[3], kw = p.kernel_w, sw = p.stride_w;
  const size_t inside = W >= kw ? W - kw + 1 : 0;
  // Outputs [ow_lo, ow_hi) start inside the row: w0 = ow sw - pad_left in [0, inside).
  const size_t ow_lo = std::min<size_t>(OW, (p.pad_left + sw - 1) / sw);
  const size_t ow_hi = std::max(ow_lo, std::min<size_t>(OW, inside ? (inside - 1 + p.pad_left) / sw + 1 : 0));
  x += pl * H * W;
  y += pl * OH * OW;
  for (size_t oh = 0; oh < OH; ++oh) {
    const int64_t h0 = int64_t(oh * p.stride_h) - p.pad_top;
    const int64_t hb = std::max<int64_t>(h0, 0), he = std::min<int64_t>(h0 + p.kernel_h, H);
    std::fill_n(acc, W, int8_t(-128));
    for (int64_t h = hb; h < he; ++h) {
      const int8_t* __restrict row = x + h * W;
      for (size_t w = 0; w < W; ++w) acc[w] = std::max(acc[w], row[w]);
    }
    std::copy_n(acc, inside, win);
    for (size_t t = 1; t < kw; ++t)
      for (size_t w = 0; w < inside; ++w) win[w] = std::max(win[w], acc[w + t]);
    int8_t* __restrict yrow = y + oh * OW;
    auto edge = [&](size_t ow) {  // a window over the padding: its own columns
      const int64_t w0 = int64_t(ow * sw) - p.pad_left;
      const int64_t wb = std::max<int64_t>(w0, 0), we = std::min<int64_t>(w0 + int64_t(kw), int64_t(W));
      int8_t v = -128;
      for (int64_t w = wb; w < we; ++w) v = std::max(v, acc[w]);
      yrow[ow] = v;
    };
    for (size_t ow = 0; ow < ow_lo; ++ow) edge(ow);
    const int8_t* first = win + (ow_lo * sw - p.pad_left);
    if (sw == 1) std::copy(first, first + (ow_hi - ow_lo), yrow + ow_lo);
    else
      for (size_t i = 0; i < ow_hi - ow_lo; ++i) yrow[ow_lo + i] = first[i * sw];
    for (size_t ow = ow_hi; ow < OW; ++ow) edge(ow);
  }
}

// max(a, b) with +0 above -0 (NaN is tracked apart by the caller).
inline float zero_aware_max(float a, float b) { return a < b || (a == b && std::signbit(a)) ? b : a; }

#ifdef SOFTDLA_X86
// zero_aware_max on 16 lanes, with NaN propagated (a + b) for the caller to make canonical: the larger
// value; of two equal values their bitwise and (+0 for +0 and -0, the value itself otherwise).
__attribute__((target("avx512f,avx512dq"), always_inline)) inline __m512 zmax(__m512 a, __m512 b) {
  __m512 m = _mm512_max_ps(a, b);
  m = _mm512_mask_mov_ps(m, _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ), _mm512_and_ps(a, b));
  return _mm512_mask_mov_ps(m, _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q), _mm512_add_ps(a, b));
}

__attribute__((target("avx512f,avx512bw,avx512vl,f16c"), always_inline)) inline __m512 load_floats(const uint16_t* p,
                                                                                                   __mmask16 m) {
  return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}
__attribute__((target("avx512f"), always_inline)) inline __m512 load_floats(const float* p, __mmask16 m) {
  return _mm512_maskz_loadu_ps(m, p);
}

inline __mmask16 tail_mask(size_t left) { return left >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << left) - 1); }

// acc[w] = zmax(acc[w], row[w]) over W values.
template <class T>
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,f16c"))) void max_into_avx512(float* acc, const T* row,
                                                                                        size_t W) {
  for (size_t w = 0; w < W; w += 16) {
    const __mmask16 m = tail_mask(W - w);
    _mm512_mask_storeu_ps(acc + w, m, zmax(_mm512_maskz_loadu_ps(m, acc + w), load_floats(row + w, m)));
  }
}

// win[w] = zmax over acc[w .. w + kw) for w < inside.
__attribute__((target("avx512f,avx512dq"))) void windows_avx512(const float* acc, float* win, size_t inside, size_t kw) {
  for (size_t w = 0; w < inside; w += 16) {
    const __mmask16 m = tail_mask(inside - w);
    __m512 v = _mm512_maskz_loadu_ps(m, acc + w);
    for (size_t t = 1; t < kw; ++t) v = zmax(v, _mm512_maskz_loadu_ps(m, acc + w + t));
    _mm512_mask_storeu_ps(win + w, m, v);
  }
}
// o[j] = the window of kw values at 2 j of the padded line (len values, a multiple of 32), for j < OW
// (o holds whole 16-value steps), NaN made canonical: the line split into its even and odd values,
// then each output the zmax of kw shifted loads, even[j + t/2] or odd[j + (t - 1)/2] for tap t, in
// the taps' order (as windows_avx512).
__attribute__((target("avx512f,avx512dq"))) void stride2_windows_avx512(const float* padded, size_t len, float* even,
                                                                        float* odd, size_t OW, size_t kw, float* o) {
  const __m512i even_idx = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd_idx = _mm512_add_epi32(even_idx, _mm512_set1_epi32(1));
  for (size_t j = 0; j < len / 2; j += 16) {
    const __m512 a = _mm512_loadu_ps(padded + 2 * j), b = _mm512_loadu_ps(padded + 2 * j + 16);
    _mm512_storeu_ps(even + j, _mm512_permutex2var_ps(a, even_idx, b));
    _mm512_storeu_ps(odd + j, _mm512_permutex2var_ps(a, odd_idx, b));
  }
  const __m512 nan = _mm512_set1_ps(std::numeric_limits<float>::quiet_NaN());
  for (size_t j = 0; j < OW; j += 16) {
    __m512 v = _mm512_loadu_ps(even + j);
    for (size_t t = 1; t < kw; ++t) v = zmax(v, _mm512_loadu_ps((t & 1 ? odd : even) + j + t / 2));
    _mm512_storeu_ps(o + j, _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), nan));
  }
}

// ---- FP16 max pooling on the halves' bits: 32 values a vector, no conversions.
// Each half maps to a signed 16-bit key that orders as the values do (the magnitude bits flipped for a
// negative value, so -0 sorts just below +0 and the maximum of the two is +0) and NaN to the largest key,
// so a window holding one picks it; the key maps back to the half, with NaN as the canonical quiet NaN
// and +-inf as +-65504, as max_plane_avx512 stores them (its fp32 results through the fp16 store rule).
// Max is exact in any order, so the bytes are max_plane_avx512's.
constexpr int16_t kNanKey = 0x7FFF;
constexpr int16_t kMinusInfKey = int16_t(0xFC00 ^ 0x7FFF);  // the padding: below every other key

__attribute__((target("avx512f,avx512bw"), always_inline)) inline __m512i half_keys(__m512i h) {
  const __m512i magnitude = _mm512_set1_epi16(0x7FFF);
  const __m512i key = _mm512_xor_si512(h, _mm512_and_si512(_mm512_srai_epi16(h, 15), magnitude));
  const __mmask32 nan = _mm512_cmpgt_epi16_mask(_mm512_and_si512(h, magnitude), _mm512_set1_epi16(0x7C00));
  return _mm512_mask_mov_epi16(key, nan, _mm512_set1_epi16(kNanKey));
}

__attribute__((target("avx512f,avx512bw"), always_inline)) inline __m512i key_halves(__m512i key) {
  const __m512i magnitude = _mm512_set1_epi16(0x7FFF);
  __m512i h = _mm512_xor_si512(key, _mm512_and_si512(_mm512_srai_epi16(key, 15), magnitude));
  h = _mm512_mask_mov_epi16(h, _mm512_cmpeq_epi16_mask(key, _mm512_set1_epi16(kNanKey)), _mm512_set1_epi16(0x7E00));
  const __mmask32 inf = _mm512_cmpeq_epi16_mask(_mm512_and_si512(h, magnitude), _mm512_set1_epi16(0x7C00));
  return _mm512_mask_sub_epi16(h, inf, h, _mm512_set1_epi16(1));  // 0x7C00 -> 0x7BFF, 0xFC00 -> 0xFBFF
}

__attribute__((target("avx512f"), always_inline)) inline __mmask32 first_words(size_t n) {
  return n >= 32 ? ~__mmask32(0) : __mmask32((1u << n) - 1);
}

// line[w] = the maximum key of rows [0, count) (x + r * W) at column w, for w < W rounded up to 32; the
// columns past W are the padding's key. Each 32 columns' keys stay in a register over the rows and are
// stored once, whole (masked stores and a line re-read per row took twice as long).
__attribute__((target("avx512f,avx512bw"))) void max_keys_of_rows(int16_t* line, const uint16_t* x, size_t count,
                                                                size_t W) {
  const __m512i padding = _mm512_set1_epi16(kMinusInfKey);
  for (size_t w = 0; w < W; w += 32) {
    const __mmask32 m = first_words(W - w);
    __m512i v = padding;
    for (size_t r = 0; r < count; ++r)
      v = _mm512_max_epi16(v, _mm512_mask_mov_epi16(padding, m, half_keys(_mm512_maskz_loadu_epi16(m, x + r * W + w))));
    _mm512_storeu_si512(line + w, v);
  }
}

// o[j] = the maximum key of the window of kw at j * sw of the padded line, as halves, for j < OW: stride
// 1 from shifted loads, other strides from stride 1's windows picked one by one (stride 2 takes
// max_plane_stride2). `windows` holds len keys; len is a multiple of 64 and covers every tap read.
__attribute__((target("avx512f,avx512bw"))) void key_windows(const int16_t* padded, size_t OW, size_t kw, size_t sw,
                                                           int16_t* windows, uint16_t* o) {
  const size_t positions = (OW - 1) * sw + 1;
  for (size_t j = 0; j < positions; j += 32) {
    __m512i v = _mm512_loadu_si512(padded + j);
    for (size_t t = 1; t < kw; ++t) v = _mm512_max_epi16(v, _mm512_loadu_si512(padded + j + t));
    _mm512_storeu_si512(windows + j, v);
  }
  if (sw != 1) {
    for (size_t j = 0; j < OW; ++j) windows[j] = windows[j * sw];  // j <= j * sw: in place, ascending
  }
  for (size_t j = 0; j < OW; j += 32)
    _mm512_mask_storeu_epi16(o + j, first_words(OW - j), key_halves(_mm512_loadu_si512(windows + j)));
}
#endif

#ifdef SOFTDLA_X86
// A global average (the window is the whole plane, one output) of up to 16 planes [p0, p0 + planes) at
// once, one plane per lane: 16 values of each plane transposed into 16 vectors of one value per plane,
// added in the plane's order, so each lane is plane()'s sum exactly; then the same division, and a
// plane holding a NaN gives the quiet NaN, as plane() does.
template <class T>
__attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,f16c"))) void global_average_avx512(const T* x, T* y, size_t p0,
                                                                                             size_t planes, size_t hw) {
  __m512 acc = _mm512_setzero_ps();
  __mmask16 nan = 0;
  for (size_t i0 = 0; i0 < hw; i0 += 16) {
    const size_t n = std::min<size_t>(16, hw - i0);
    const __mmask16 m = tail_mask(n);
    __m512 v[16];
    for (size_t c = 0; c < 16; ++c) v[c] = c < planes ? load_floats(x + (p0 + c) * hw + i0, m) : _mm512_setzero_ps();
    transpose16(v);
    for (size_t j = 0; j < n; ++j) {
      acc = _mm512_add_ps(acc, v[j]);
      nan |= _mm512_cmp_ps_mask(v[j], v[j], _CMP_UNORD_Q);
    }
  }
  acc = _mm512_div_ps(acc, _mm512_set1_ps(float(hw)));
  acc = _mm512_mask_mov_ps(acc, nan, _mm512_set1_ps(std::numeric_limits<float>::quiet_NaN()));
  if constexpr (std::is_same_v<T, uint16_t>) store_halves_avx512(acc, y + p0, tail_mask(planes));
  else _mm512_mask_storeu_ps(y + p0, tail_mask(planes), acc);
}
#endif

#ifdef SOFTDLA_X86
// Max pooling of stride 2 along the rows on AVX-512, straight from the input rows: 32 outputs a step,
// each element as a 16-bit key that orders as the values do (HalfKeys: an fp16's key, as above; ByteKeys:
// an int8 sign-extended). A step loads the 64 columns from 2 j0 - pad_left of every window row (lanes
// outside the row under the padding's key) and takes their column-wise maximum: its even lanes are tap
// 0's values of the 32 outputs, its odd lanes tap 1's, and taps 2m and 2m + 1 the same shifted by m
// (max_row_stride2). Exact, as every max is, in any order: the bytes of the other max paths.
// Why: the earlier form reduced the rows into a line in memory and split it into even and odd keys there;
// each step then loaded what the step before had just stored, at another alignment, and waited for the
// stores to reach the cache (ResNet's 112 x 112 stem pool ran at 1.7-1.9 x ORT's time on a Zen 5 core).
struct HalfKeys {
  using T = uint16_t;
  static constexpr int16_t kPadding = kMinusInfKey;
  __attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) static __m512i load(const T* p, __mmask32 m) {
    return _mm512_mask_mov_epi16(_mm512_set1_epi16(kPadding), m, half_keys(_mm512_maskz_loadu_epi16(m, p)));
  }
  __attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) static void store(T* o, __mmask32 m, __m512i keys) {
    _mm512_mask_storeu_epi16(o, m, key_halves(keys));
  }
};
// INT8: the padding is -128, the smallest int8, so a window over it is the maximum of its inputs (as
// max_plane_s8's edge windows are), and a window with no input row gives -128 as there.
struct ByteKeys {
  using T = int8_t;
  static constexpr int16_t kPadding = -128;
  __attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) static __m512i load(const T* p, __mmask32 m) {
    return _mm512_mask_mov_epi16(_mm512_set1_epi16(kPadding), m, _mm512_cvtepi8_epi16(_mm256_maskz_loadu_epi8(m, p)));
  }
  __attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) static void store(T* o, __mmask32 m, __m512i keys) {
    _mm256_mask_storeu_epi8(o, m, _mm512_cvtepi16_epi8(keys));
  }
};

// The lanes i of a 32-column step from column u0 with 0 <= u0 + i < W.
inline __mmask32 columns_inside(int64_t u0, size_t W) {
  const int64_t first = std::clamp<int64_t>(-u0, 0, 32), past = std::clamp<int64_t>(int64_t(W) - u0, 0, 32);
  if (first >= past) return 0;
  return __mmask32(((uint64_t(1) << past) - 1) & ~((uint64_t(1) << first) - 1));
}

// Column u of `row` (u may lie outside the row: the step's mask then covers none of those lanes, and a
// masked load touches no masked-out element). Integer arithmetic: the address may precede the buffer.
template <class T>
inline const T* column_at(const T* row, int64_t u) {
  return reinterpret_cast<const T*>(reinterpret_cast<uintptr_t>(row) + uintptr_t(u * int64_t(sizeof(T))));
}

// The keys of the 64 columns from u0 (two vectors, lanes outside [0, W) the padding's), each the maximum
// over `rows` rows of W columns from x, split into the even columns' (*even) and the odd ones' (*odd).
template <class K>
__attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) inline void column_pairs(
    const typename K::T* x, size_t W, size_t rows, int64_t u0, __m512i* even, __m512i* odd) {
  alignas(64) static constexpr uint16_t kEven[32] = {0,  2,  4,  6,  8,  10, 12, 14, 16, 18, 20,
                                                     22, 24, 26, 28, 30, 32, 34, 36, 38, 40, 42,
                                                     44, 46, 48, 50, 52, 54, 56, 58, 60, 62};
  const __m512i even_idx = _mm512_load_si512(kEven), odd_idx = _mm512_add_epi16(even_idx, _mm512_set1_epi16(1));
  const __mmask32 m0 = columns_inside(u0, W), m1 = columns_inside(u0 + 32, W);
  __m512i a = _mm512_set1_epi16(K::kPadding), b = a;
  if (m0 | m1)
    for (size_t r = 0; r < rows; ++r) {
      const typename K::T* row = x + r * W;
      a = _mm512_max_epi16(a, K::load(column_at(row, u0), m0));
      b = _mm512_max_epi16(b, K::load(column_at(row, u0 + 32), m1));
    }
  *even = _mm512_permutex2var_epi16(a, even_idx, b);
  *odd = _mm512_permutex2var_epi16(a, odd_idx, b);
}

// One output row: `rows` window rows of W columns from x, kw taps from padded column 2 j, OW outputs to o.
// Output j's taps 2m and 2m + 1 are the even and odd columns' keys at j + m: the step's own pairs shifted
// by m lanes, the lanes past them from the next step's (computed once, and kept for that step). A shift
// reaches at most 31 lanes into the next step, so kw is at most 64 (the loadable checks allow 8).
template <class K>
__attribute__((target("avx512f,avx512bw,avx512vl"))) void max_row_stride2(const typename K::T* x, size_t W,
                                                                          size_t rows, size_t kw, size_t pad_left,
                                                                          size_t OW, typename K::T* o) {
  alignas(64) static constexpr uint16_t kLanes[32] = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10,
                                                      11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
                                                      22, 23, 24, 25, 26, 27, 28, 29, 30, 31};
  const __m512i lanes = _mm512_load_si512(kLanes);
  int64_t u0 = -int64_t(pad_left);
  __m512i even, odd, next_even, next_odd;
  column_pairs<K>(x, W, rows, u0, &even, &odd);
  for (size_t j0 = 0; j0 < OW; j0 += 32, u0 += 64) {
    column_pairs<K>(x, W, rows, u0 + 64, &next_even, &next_odd);
    __m512i acc = even;
    if (kw > 1) acc = _mm512_max_epi16(acc, odd);
    for (size_t m = 1; 2 * m < kw; ++m) {
      const __m512i shift = _mm512_add_epi16(lanes, _mm512_set1_epi16(int16_t(m)));
      acc = _mm512_max_epi16(acc, _mm512_permutex2var_epi16(even, shift, next_even));
      if (2 * m + 1 < kw) acc = _mm512_max_epi16(acc, _mm512_permutex2var_epi16(odd, shift, next_odd));
    }
    K::store(o + j0, first_words(OW - j0), acc);
    even = next_even, odd = next_odd;
  }
}

// Output rows ahead whose new input rows max_plane_stride2 prefetches.
constexpr size_t kPoolPrefetchRows = 6;

// A plane of max pooling of stride 2 along the rows, output row by output row (max_row_stride2). Each
// output row fetches the input rows that the row kPoolPrefetchRows below it adds: the steps read their
// rows under masks, which Zen 5's prefetchers do not follow (prefetch_lines.h). ResNet's stem pool at
// batch 8 (512 planes of 112 x 112) from memory, one thread: FP16 2.96 -> 0.70 ms, INT8 1.43 -> 0.40 ms.
template <class K>
void max_plane_stride2(const PoolParams& p, const Shape& in, const Shape& out, const typename K::T* x,
                       typename K::T* y, size_t pl) {
  const size_t H = in[2], W = in[3], OH = out[2], OW = out[3];
  x += pl * H * W;
  y += pl * OH * OW;
  const size_t fresh = std::min(p.stride_h, p.kernel_h);  // input rows an output row adds to the one above
  for (size_t oh = 0; oh < OH; ++oh) {
    const int64_t h0 = int64_t(oh * p.stride_h) - p.pad_top;
    const int64_t hb = std::max<int64_t>(h0, 0), he = std::min<int64_t>(h0 + p.kernel_h, H);
    // Rows past the plane are the next plane's, which the thread usually pools next.
    const int64_t ahead = h0 + int64_t(kPoolPrefetchRows * p.stride_h + p.kernel_h - fresh);
    prefetch_lines(x, std::ptrdiff_t(ahead * int64_t(W * sizeof(typename K::T))), fresh * W * sizeof(typename K::T));
    max_row_stride2<K>(x + hb * W, W, size_t(std::max<int64_t>(he - hb, 0)), p.kernel_w, p.pad_left, OW, y + oh * OW);
  }
}
#endif

class PoolKernel final : public OpKernel {
 public:
  PoolKernel(const Model& m, const Op& op, const PoolParams& p)
      : p_(p), dtype_(m.tensors[op.outputs[0]].dtype), in_(m.tensors[op.inputs[0]].shape),
        out_(m.tensors[op.outputs[0]].shape) {}

  void run(const OpIo& io, ThreadPool& pool) const override {
    const size_t planes = size_t(in_[0]) * in_[1], hw = size_t(in_[2]) * in_[3];
#ifdef SOFTDLA_X86
    if (dtype_ != DataType::kInt8 && global_average() && has_avx512(active_isa())) {
      pool.parallel_for((planes + 15) / 16, [&](size_t b, size_t e) {
        with_float_storage(dtype_, [&](auto* tag) {
          using T = std::remove_pointer_t<decltype(tag)>;
          for (size_t u = b; u < e; ++u)
            global_average_avx512(static_cast<const T*>(io.inputs[0]), static_cast<T*>(io.output), u * 16,
                                  std::min<size_t>(16, planes - u * 16), hw);
        });
      }, ThreadPool::min_items(16 * hw));
      return;
    }
#endif
    if (dtype_ == DataType::kInt8 && global_average()) {
      pool.parallel_for(planes, [&](size_t b, size_t e) {
        global_average_s8(static_cast<const int8_t*>(io.inputs[0]), static_cast<int8_t*>(io.output), b, e, hw,
                          p_.kernel_w, p_.kernel_h);
      }, ThreadPool::min_items(hw));
      return;
    }
    pool.parallel_for(planes, [&](size_t b, size_t e) {
      thread_local std::vector<int32_t> line, windows;
      thread_local std::vector<int8_t> line8, windows8;
      const bool max8 = dtype_ == DataType::kInt8 && p_.kind == PoolKind::kMax;
      if (max8) line8.resize(in_[3]), windows8.resize(in_[3]);
      else if (dtype_ == DataType::kInt8) line.resize(in_[3]), windows.resize(in_[3]);
      for (size_t pl = b; pl < e; ++pl) {
#ifdef SOFTDLA_X86
        if (max8 && p_.stride_w == 2 && has_avx512(active_isa())) {
          max_plane_stride2<ByteKeys>(p_, in_, out_, static_cast<const int8_t*>(io.inputs[0]),
                                      static_cast<int8_t*>(io.output), pl);
          continue;
        }
#endif
        if (max8)
          max_plane_s8(p_, in_, out_, static_cast<const int8_t*>(io.inputs[0]), static_cast<int8_t*>(io.output), pl,
                       line8.data(), windows8.data());
        else if (dtype_ == DataType::kInt8)
          plane_s8(p_, in_, out_, static_cast<const int8_t*>(io.inputs[0]), static_cast<int8_t*>(io.output), pl,
                   line.data(), windows.data());
        else
          with_float_storage(dtype_, [&](auto* tag) {
            using T = std::remove_pointer_t<decltype(tag)>;
            const T* x = static_cast<const T*>(io.inputs[0]);
            T* y = static_cast<T*>(io.output);
            if (p_.kind == PoolKind::kMax && has_avx512(active_isa())) {
              if constexpr (std::is_same_v<T, uint16_t>) {  // fp16: on its 16-bit keys
                if (p_.stride_w == 2) max_plane_stride2<HalfKeys>(p_, in_, out_, x, y, pl);
                else max_plane_halves(x, y, pl);
              } else {
                max_plane_avx512(x, y, pl);
              }
            } else if (p_.kind == PoolKind::kMax) {
              max_plane(x, y, pl);
            } else {
              plane(x, y, pl);
            }
          });
      }
    }, ThreadPool::min_items(size_t(out_[2]) * out_[3] * p_.kernel_h * p_.kernel_w));
  }

 private:
  // One float plane (fp32 or fp16 storage). An fp16 plane is widened in bulk first and each output row
  // narrowed in bulk (both exact conversions: the same values as converting element by element).
  template <class T>
  void plane(const T* x, T* y, size_t pl) const {
    const size_t H = in_[2], W = in_[3], OH = out_[2], OW = out_[3];
    x += pl * H * W;
    y += pl * OH * OW;
    thread_local std::vector<float> widened, row;
    const float* xf;
    if constexpr (std::is_same_v<T, uint16_t>) {
      widened.resize(H * W);
      halves_to_floats(x, widened.data(), H * W);
      xf = widened.data();
    } else {
      xf = x;
    }
    row.resize(OW);
    for (size_t oh = 0; oh < OH; ++oh) {
      const int64_t h0 = int64_t(oh * p_.stride_h) - p_.pad_top;
      const int64_t hb = std::max<int64_t>(h0, 0), he = std::min<int64_t>(h0 + p_.kernel_h, H);
      for (size_t ow = 0; ow < OW; ++ow) {
        const int64_t w0 = int64_t(ow * p_.stride_w) - p_.pad_left;
        const int64_t wb = std::max<int64_t>(w0, 0), we = std::min<int64_t>(w0 + p_.kernel_w, W);
        const unsigned kh = p_.exclude_padding ? unsigned(he - hb) : p_.kernel_h;
        const unsigned kw = p_.exclude_padding ? unsigned(we - wb) : p_.kernel_w;
        float acc = p_.kind == PoolKind::kMax ? -std::numeric_limits<float>::infinity() : 0.f;
        bool nan = false;
        for (int64_t h = hb; h < he; ++h)
          for (int64_t w = wb; w < we; ++w) {
            const float v = xf[size_t(h * W + w)];
            nan |= std::isnan(v);
            acc = p_.kind == PoolKind::kMax ? std::max(acc, v) : acc + v;
          }
        if (p_.kind == PoolKind::kAverage) acc /= float(kh * kw);
        row[ow] = nan ? std::numeric_limits<float>::quiet_NaN() : acc;
      }
      if constexpr (std::is_same_v<T, uint16_t>) floats_to_halves(row.data(), y + oh * OW, OW);
      else std::copy_n(row.data(), OW, y + oh * OW);
    }
  }

  // Max pooling of a float plane, separably as plane_s8; a NaN anywhere in a window makes that output
  // NaN, as in plane(). The maximum of +0 and -0 is +0 (IEEE 754's maximum), so the result does not
  // depend on the order the window is reduced in (NUMERICS.md).
  template <class T>
  void max_plane(const T* x, T* y, size_t pl) const {
    const size_t H = in_[2], W = in_[3], OH = out_[2], OW = out_[3], kw = p_.kernel_w;
    const size_t inside = W >= kw ? W - kw + 1 : 0;
    x += pl * H * W;
    y += pl * OH * OW;
    thread_local std::vector<float> row, line, windows;
    thread_local std::vector<uint8_t> nan_line, nan_windows;
    row.resize(W), line.resize(W), windows.resize(W), nan_line.resize(W), nan_windows.resize(W);
    float *__restrict acc = line.data(), *__restrict win = windows.data();
    uint8_t *__restrict nan = nan_line.data(), *__restrict nan_win = nan_windows.data();
    for (size_t oh = 0; oh < OH; ++oh) {
      const int64_t h0 = int64_t(oh * p_.stride_h) - p_.pad_top;
      const int64_t hb = std::max<int64_t>(h0, 0), he = std::min<int64_t>(h0 + p_.kernel_h, H);
      std::fill_n(acc, W, -std::numeric_limits<float>::infinity());
      std::fill_n(nan, W, uint8_t(0));
      for (int64_t h = hb; h < he; ++h) {
        const float* r;
        if constexpr (std::is_same_v<T, uint16_t>) halves_to_floats(x + h * W, row.data(), W), r = row.data();
        else r = x + h * W;
        for (size_t w = 0; w < W; ++w) nan[w] |= uint8_t(r[w] != r[w]), acc[w] = zero_aware_max(acc[w], r[w]);
      }
      std::copy_n(acc, inside, win);
      std::copy_n(nan, inside, nan_win);
      for (size_t t = 1; t < kw; ++t)
        for (size_t w = 0; w < inside; ++w) win[w] = zero_aware_max(win[w], acc[w + t]), nan_win[w] |= nan[w + t];
      for (size_t ow = 0; ow < OW; ++ow) {
        const int64_t w0 = int64_t(ow * p_.stride_w) - p_.pad_left;
        float v = -std::numeric_limits<float>::infinity();
        bool is_nan = false;
        if (w0 >= 0 && size_t(w0) < inside) {
          v = win[w0], is_nan = nan_win[w0];
        } else {
          const int64_t wb = std::max<int64_t>(w0, 0), we = std::min<int64_t>(w0 + p_.kernel_w, W);
          for (int64_t w = wb; w < we; ++w) v = zero_aware_max(v, acc[w]), is_nan |= nan[w] != 0;
        }
        store(y, oh * OW + ow, is_nan ? std::numeric_limits<float>::quiet_NaN() : v);
      }
    }
  }

  // max_plane of an fp32 plane on AVX-512 (fp16 planes take max_plane_halves): the same values (NaN made
  // canonical at the end), vectorised passes. The window rows are reduced into a line padded
  // with -inf on both sides (zmax(-inf, v) is v, NaN included, so a window over the padding is the
  // maximum of its inputs, as max_plane's); the windows are then read at the stride: of stride 2 from
  // the line's even and odd values (16 outputs a step), of other strides from every window position.
  void max_plane_avx512(const float* x, float* y, size_t pl) const {
#ifdef SOFTDLA_X86
    const size_t H = in_[2], W = in_[3], OH = out_[2], OW = out_[3], kw = p_.kernel_w, sw = p_.stride_w;
    const size_t reach = (OW - 1) * sw + kw;  // padded positions the windows read
    const size_t len = (std::max(reach, p_.pad_left + W) + 31) / 32 * 32 + 64;  // whole 32-value steps, and the taps past the last
    x += pl * H * W;
    y += pl * OH * OW;
    thread_local std::vector<float> line, even, odd, windows, outs;
    line.resize(len), outs.resize(OW + 16);
    float *__restrict padded = line.data(), *__restrict acc = padded + p_.pad_left, *__restrict o = outs.data();
    if (sw == 2) even.resize(len / 2), odd.resize(len / 2);
    else windows.resize(reach + 16);
    for (size_t oh = 0; oh < OH; ++oh) {
      const int64_t h0 = int64_t(oh * p_.stride_h) - p_.pad_top;
      const int64_t hb = std::max<int64_t>(h0, 0), he = std::min<int64_t>(h0 + p_.kernel_h, H);
      std::fill_n(padded, len, -std::numeric_limits<float>::infinity());
      for (int64_t h = hb; h < he; ++h) max_into_avx512(acc, x + h * W, W);
      if (sw == 2) {
        stride2_windows_avx512(padded, len, even.data(), odd.data(), OW, kw, o);
      } else {
        windows_avx512(padded, windows.data(), (OW - 1) * sw + 1, kw);
        for (size_t ow = 0; ow < OW; ++ow) {
          const float v = windows[ow * sw];
          o[ow] = v != v ? std::numeric_limits<float>::quiet_NaN() : v;
        }
      }
      std::copy_n(o, OW, y + oh * OW);
    }
#else
    max_plane(x, y, pl);
#endif
  }

  // max_plane_avx512 of an fp16 plane on the halves' 16-bit keys (max_keys_of_rows, key_windows): the same
  // bytes, without widening the input or narrowing the results (a ResNet stem's 112 x 112 max pool:
  // 0.34 ms on a Zen 4 core through fp32). Strides other than 2 (which take max_plane_stride2).
  void max_plane_halves(const uint16_t* x, uint16_t* y, size_t pl) const {
#ifdef SOFTDLA_X86
    const size_t H = in_[2], W = in_[3], OH = out_[2], OW = out_[3], kw = p_.kernel_w, sw = p_.stride_w;
    const size_t reach = (OW - 1) * sw + kw;  // padded positions the windows read
    // Whole 64-key steps, and room for the last vectors' taps past the end.
    const size_t len = (std::max(reach, p_.pad_left + W) + 63) / 64 * 64 + 128;
    const size_t stored = p_.pad_left + (W + 31) / 32 * 32;  // max_keys_of_rows writes [pad_left, stored)
    x += pl * H * W;
    y += pl * OH * OW;
    thread_local std::vector<int16_t> keys;  // the line, the windows
    keys.resize(2 * len);
    int16_t *line = keys.data(), *windows = line + len;
    std::fill_n(line, p_.pad_left, kMinusInfKey);  // the padding around the columns the rows fill
    std::fill(line + stored, line + len, kMinusInfKey);
    for (size_t oh = 0; oh < OH; ++oh) {
      const int64_t h0 = int64_t(oh * p_.stride_h) - p_.pad_top;
      const int64_t hb = std::max<int64_t>(h0, 0), he = std::min<int64_t>(h0 + p_.kernel_h, H);
      max_keys_of_rows(line + p_.pad_left, x + hb * W, size_t(std::max<int64_t>(he - hb, 0)), W);
      key_windows(line, OW, kw, sw, windows, y + oh * OW);
    }
#else
    max_plane(x, y, pl);
#endif
  }

  // An average whose one window is each whole plane (a global average pool).
  bool global_average() const {
    return p_.kind == PoolKind::kAverage && out_[2] == 1 && out_[3] == 1 && p_.kernel_h == in_[2] &&
           p_.kernel_w == in_[3] && p_.pad_top == 0 && p_.pad_left == 0;
  }

  PoolParams p_;
  DataType dtype_;
  Shape in_, out_;
};

}  // namespace

std::unique_ptr<OpKernel> make_pool(const Model& m, const Op& op, const PoolParams& p) {
  return std::make_unique<PoolKernel>(m, op, p);
}

}  // namespace softdla::cpu
