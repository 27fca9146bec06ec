#include "int8_requant.h"

#include <algorithm>

#include "x86_simd.h"

namespace softdla::cpu {
namespace {

inline int8_t sat8_32(int32_t v) { return int8_t(std::clamp(v, -128, 127)); }

inline int32_t window_value(int32_t a, const num::RequantWindow& w) {
  return w.shifts & num::RequantWindow::kNonNegative ? num::requant_window_nonnegative(a, w)
                                                     : num::requant_window_value(a, w);
}

void requantize_portable(const int32_t* acc, const num::RequantWindow& w, int8_t* out, size_t count) {
  for (size_t i = 0; i < count; ++i) out[i] = sat8_32(window_value(acc[i], w));
}
void requantize_s8_portable(const int8_t* x, const num::RequantWindow& w, int8_t* out, size_t count) {
  for (size_t i = 0; i < count; ++i) out[i] = sat8_32(window_value(x[i], w));
}
template <bool kNonNegative, bool kPlainX>
void residual_loop(const int8_t* x, const int8_t* e, const num::ResidualWindow& w, int8_t* out, size_t count) {
  for (size_t i = 0; i < count; ++i) out[i] = sat8_32(num::residual_window_value<kNonNegative, kPlainX>(x[i], e[i], w));
}
void residual_portable(const int8_t* x, const int8_t* e, const num::ResidualWindow& w, int8_t* out, size_t count) {
  const bool nonnegative = w.out.shifts & num::RequantWindow::kNonNegative, plain = w.x_product != 0;
  if (nonnegative) (plain ? residual_loop<true, true> : residual_loop<true, false>)(x, e, w, out, count);
  else (plain ? residual_loop<false, true> : residual_loop<false, false>)(x, e, w, out, count);
}

#ifdef SOFTDLA_X86
// v * m + add, rounded and shifted as requant_window.h does (rshift_rhaz: + half, - 1 when negative,
// unless the form is known non-negative), returned as the int32 word the result lives in. Products
// are taken on 64-bit lanes, even lanes then odd (vpmuldq reads the low 32 bits of each, signed); the
// shift is logical by min(s, 32) (the low 32 bits agree with the arithmetic shift's), then arithmetic
// by what is left past 32.
//
// With shifts of 32 or more (the usual case: multipliers are normalized to [2^30, 2^31)), the word is
// the products' high half: one two-source dword permute picks it from both sets of lanes instead of two
// 64-bit shifts, a shift back and a blend.
struct MulShift512 {
  __m512i m, add, half, high_words;
  __m128i s1, s2;
  bool nonnegative, high;
  __attribute__((target("avx512f,avx512bw"))) MulShift512(int32_t mult, int64_t add_, int64_t half_, uint32_t shifts,
                                                          bool nonneg)
      : m(_mm512_set1_epi64(mult)), add(_mm512_set1_epi64(add_)), half(_mm512_set1_epi64(half_)),
        high_words(_mm512_setr_epi32(1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31)),
        s1(_mm_cvtsi32_si128(int(std::min(shifts & 255u, 32u)))), s2(_mm_cvtsi32_si128(int((shifts >> 8) & 255u))),
        nonnegative(nonneg), high((shifts & 255u) >= 32) {}
  // The product with the rounding terms (rshift_rhaz: + half, - 1 when negative; none when the form is
  // known non-negative, its half folded into add).
  __attribute__((target("avx512f,avx512bw"), always_inline)) __m512i rounded(__m512i p) const {
    return nonnegative ? p : _mm512_add_epi64(_mm512_add_epi64(p, half), _mm512_srai_epi64(p, 63));
  }
  __attribute__((target("avx512f,avx512bw"), always_inline)) __m512i apply(__m512i v) const {
    const __m512i pe = rounded(_mm512_add_epi64(_mm512_mul_epi32(v, m), add));
    const __m512i po = rounded(_mm512_add_epi64(_mm512_mul_epi32(_mm512_srli_epi64(v, 32), m), add));
    const __m512i r = high ? _mm512_permutex2var_epi32(pe, high_words, po)
                           : _mm512_mask_blend_epi32(0xAAAA, _mm512_srl_epi64(pe, s1),
                                                     _mm512_slli_epi64(_mm512_srl_epi64(po, s1), 32));
    return _mm512_sra_epi32(r, s2);
  }
};

struct Window512 {
  __m512i lo, hi;
  MulShift512 ms;
  __attribute__((target("avx512f,avx512bw"))) explicit Window512(const num::RequantWindow& w)
      : lo(_mm512_set1_epi32(w.lo)), hi(_mm512_set1_epi32(w.hi)),
        ms(w.mult, w.bias_mult, w.half, w.shifts, w.shifts & num::RequantWindow::kNonNegative) {}
  __attribute__((target("avx512f,avx512bw"), always_inline)) __m128i apply(__m512i a) const {
    return _mm512_cvtsepi32_epi8(ms.apply(_mm512_min_epi32(_mm512_max_epi32(a, lo), hi)));
  }
};

__attribute__((target("avx512f,avx512bw,avx512vl"))) void requantize_avx512(const int32_t* acc,
                                                                            const num::RequantWindow& w, int8_t* out,
                                                                            size_t count) {
  const Window512 win(w);
  size_t i = 0;
  for (; i + 16 <= count; i += 16)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), win.apply(_mm512_loadu_si512(acc + i)));
  if (i < count) {  // the tail under a mask (short runs are common: one output row of a 7x7 layer)
    const __mmask16 m = __mmask16((1u << (count - i)) - 1);
    _mm_mask_storeu_epi8(out + i, m, win.apply(_mm512_maskz_loadu_epi32(m, acc + i)));
  }
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) void requantize_s8_avx512(const int8_t* x,
                                                                               const num::RequantWindow& w, int8_t* out,
                                                                               size_t count) {
  const Window512 win(w);
  for (size_t i = 0; i < count; i += 16) {
    const __mmask16 m = count - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (count - i)) - 1);
    const __m512i a = _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, x + i));
    _mm_mask_storeu_epi8(out + i, m, win.apply(a));
  }
}

// The tails under a mask: a residual add fused into a convolution gets one output row at a time (7 to
// 56 values in ResNet-50).
__attribute__((target("avx512f,avx512bw,avx512vl"))) void residual_avx512(const int8_t* x, const int8_t* e,
                                                                          const num::ResidualWindow& w, int8_t* out,
                                                                          size_t count) {
  const Window512 win(w.out);
  const MulShift512 rx(w.x.mult, 0, w.x.half, w.x.shifts, false), re(w.e.mult, 0, w.e.half, w.e.shifts, false);
  const __m512i xp = _mm512_set1_epi32(w.x_product);
  const bool plain = w.x_product != 0;
  for (size_t i = 0; i < count; i += 16) {
    const __mmask16 m = count - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (count - i)) - 1);
    const __m512i xv = _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, x + i));
    const __m512i ev = _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, e + i));
    const __m512i sx = plain ? _mm512_mullo_epi32(xv, xp) : rx.apply(xv);
    _mm_mask_storeu_epi8(out + i, m, win.apply(_mm512_add_epi32(sx, re.apply(ev))));
  }
}

// The same on 8 lanes. AVX2 has no 64-bit arithmetic shift: the sign term comes from a compare.
struct MulShift256 {
  __m256i m, add, half;
  __m128i s1, s2;
  bool nonnegative;
  __attribute__((target("avx2"))) MulShift256(int32_t mult, int64_t add_, int64_t half_, uint32_t shifts, bool nonneg)
      : m(_mm256_set1_epi64x(mult)), add(_mm256_set1_epi64x(add_)), half(_mm256_set1_epi64x(half_)),
        s1(_mm_cvtsi32_si128(int(std::min(shifts & 255u, 32u)))), s2(_mm_cvtsi32_si128(int((shifts >> 8) & 255u))),
        nonnegative(nonneg) {}
  __attribute__((target("avx2"), always_inline)) __m256i word(__m256i p) const {
    if (!nonnegative)
      p = _mm256_add_epi64(_mm256_add_epi64(p, half), _mm256_cmpgt_epi64(_mm256_setzero_si256(), p));
    return _mm256_srl_epi64(p, s1);
  }
  __attribute__((target("avx2"), always_inline)) __m256i apply(__m256i v) const {
    const __m256i pe = _mm256_add_epi64(_mm256_mul_epi32(v, m), add);
    const __m256i po = _mm256_add_epi64(_mm256_mul_epi32(_mm256_srli_epi64(v, 32), m), add);
    const __m256i r = _mm256_blend_epi32(word(pe), _mm256_slli_epi64(word(po), 32), 0xAA);
    return _mm256_sra_epi32(r, s2);
  }
};

struct Window256 {
  __m256i lo, hi;
  MulShift256 ms;
  __attribute__((target("avx2"))) explicit Window256(const num::RequantWindow& w)
      : lo(_mm256_set1_epi32(w.lo)), hi(_mm256_set1_epi32(w.hi)),
        ms(w.mult, w.bias_mult, w.half, w.shifts, w.shifts & num::RequantWindow::kNonNegative) {}
  // Eight int8 results in the low 8 bytes (int32 -> int16 -> int8, saturating; lanes stay in order).
  __attribute__((target("avx2"), always_inline)) __m128i apply(__m256i a) const {
    const __m256i r = ms.apply(_mm256_min_epi32(_mm256_max_epi32(a, lo), hi));
    const __m128i r16 = _mm_packs_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    return _mm_packs_epi16(r16, r16);
  }
};

__attribute__((target("avx2"))) inline __m256i load8_s8(const int8_t* p) {
  return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

__attribute__((target("avx2"))) void requantize_avx2(const int32_t* acc, const num::RequantWindow& w, int8_t* out,
                                                     size_t count) {
  const Window256 win(w);
  size_t i = 0;
  for (; i + 8 <= count; i += 8)
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + i),
                     win.apply(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + i))));
  requantize_portable(acc + i, w, out + i, count - i);
}

__attribute__((target("avx2"))) void requantize_s8_avx2(const int8_t* x, const num::RequantWindow& w, int8_t* out,
                                                        size_t count) {
  const Window256 win(w);
  size_t i = 0;
  for (; i + 8 <= count; i += 8) _mm_storel_epi64(reinterpret_cast<__m128i*>(out + i), win.apply(load8_s8(x + i)));
  requantize_s8_portable(x + i, w, out + i, count - i);
}

__attribute__((target("avx2"))) void residual_avx2(const int8_t* x, const int8_t* e, const num::ResidualWindow& w,
                                                   int8_t* out, size_t count) {
  const Window256 win(w.out);
  const MulShift256 rx(w.x.mult, 0, w.x.half, w.x.shifts, false), re(w.e.mult, 0, w.e.half, w.e.shifts, false);
  const __m256i xp = _mm256_set1_epi32(w.x_product);
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256i xv = load8_s8(x + i), ev = load8_s8(e + i);
    const __m256i sx = w.x_product ? _mm256_mullo_epi32(xv, xp) : rx.apply(xv);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + i), win.apply(_mm256_add_epi32(sx, re.apply(ev))));
  }
  if (i < count) {  // the tail through an 8-value staging run (AVX2 has no byte masks)
    int8_t xs[8] = {}, es[8] = {}, os[8];
    std::copy(x + i, x + count, xs), std::copy(e + i, e + count, es);
    residual_avx2(xs, es, w, os, 8);
    std::copy(os, os + (count - i), out + i);
  }
}
#endif

}  // namespace

void requantize_window(Isa isa, const int32_t* acc, const num::RequantWindow& w, int8_t* out, size_t count) {
#ifdef SOFTDLA_X86
  if (has_avx512(isa)) return requantize_avx512(acc, w, out, count);
  if (isa >= Isa::kAvx2) return requantize_avx2(acc, w, out, count);
#endif
  (void)isa;
  requantize_portable(acc, w, out, count);
}

void requantize_window_s8(Isa isa, const int8_t* x, const num::RequantWindow& w, int8_t* out, size_t count) {
#ifdef SOFTDLA_X86
  if (has_avx512(isa)) return requantize_s8_avx512(x, w, out, count);
  if (isa >= Isa::kAvx2) return requantize_s8_avx2(x, w, out, count);
#endif
  (void)isa;
  requantize_s8_portable(x, w, out, count);
}

void residual_add(Isa isa, const int8_t* x, const int8_t* e, const num::ResidualWindow& w, int8_t* out, size_t count) {
#ifdef SOFTDLA_X86
  if (has_avx512(isa)) return residual_avx512(x, e, w, out, count);
  if (isa >= Isa::kAvx2) return residual_avx2(x, e, w, out, count);
#endif
  (void)isa;
  residual_portable(x, e, w, out, count);
}

}  // namespace softdla::cpu
