// The AVX-512 and AVX2 forms of requant_window.h's requantization and residual add, as inline structs:
// int8_requant.cpp runs them over whole runs, and the INT8 GEMM's epilogue (gemm_vnni.cpp) applies them
// to a register tile's rows as they leave the micro-kernel. Bytes as the direct form on every path.
#pragma once
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "int8_requant.h"
#include "requant_window.h"
#include "x86_simd.h"

#ifdef SOFTDLA_X86
namespace softdla::cpu {

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
  template <bool kNonNegative>
  __attribute__((target("avx512f,avx512bw"), always_inline)) __m512i rounded_as(__m512i p) const {
    return kNonNegative ? p : _mm512_add_epi64(_mm512_add_epi64(p, half), _mm512_srai_epi64(p, 63));
  }
  __attribute__((target("avx512f,avx512bw"), always_inline)) __m512i apply(__m512i v) const {
    if (nonnegative) return high ? apply_as<true, true>(v) : apply_as<true, false>(v);
    return high ? apply_as<false, true>(v) : apply_as<false, false>(v);
  }
  // apply with the form's two flags known at compile time: straight-line code for a loop that picked
  // its form once (Window512::with_form), where the run-time flags left branches in every vector's path.
  template <bool kNonNegative, bool kHigh>
  __attribute__((target("avx512f,avx512bw"), always_inline)) __m512i apply_as(__m512i v) const {
    const __m512i pe = rounded_as<kNonNegative>(_mm512_add_epi64(_mm512_mul_epi32(v, m), add));
    const __m512i po = rounded_as<kNonNegative>(_mm512_add_epi64(_mm512_mul_epi32(_mm512_srli_epi64(v, 32), m), add));
    const __m512i r = kHigh ? _mm512_permutex2var_epi32(pe, high_words, po)
                            : _mm512_mask_blend_epi32(0xAAAA, _mm512_srl_epi64(pe, s1),
                                                      _mm512_slli_epi64(_mm512_srl_epi64(po, s1), 32));
    return _mm512_sra_epi32(r, s2);
  }
};

// 64 int32 lanes (a, b, c, d in that order) saturated to int8 in order: two word packs and a byte pack
// (each saturating, so together the int32 -> int8 saturation), then one dword permute undoing the
// packs' interleave of 128-bit lanes. 4 shuffle-port instructions where four vpmovsdb take 8.
__attribute__((target("avx512f,avx512bw"), always_inline)) inline __m512i saturate_64_s8(__m512i a, __m512i b,
                                                                                        __m512i c, __m512i d) {
  // After the packs, 128-bit lane i holds a's, b's, c's and d's values 4i..4i+3 (dwords 4i + 0..3);
  // dword 4j + i of the result is input j's values 4i..4i+3.
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const __m512i bytes = _mm512_packs_epi16(_mm512_packs_epi32(a, b), _mm512_packs_epi32(c, d));
  return _mm512_permutexvar_epi32(order, bytes);
}

struct Window512 {
  __m512i lo, hi;
  MulShift512 ms;
  __attribute__((target("avx512f,avx512bw"))) explicit Window512(const num::RequantWindow& w)
      : lo(_mm512_set1_epi32(w.lo)), hi(_mm512_set1_epi32(w.hi)),
        ms(w.mult, w.bias_mult, w.half, w.shifts, w.shifts & num::RequantWindow::kNonNegative) {}
  __attribute__((target("avx512f,avx512bw"), always_inline)) __m128i apply(__m512i a) const {
    return _mm512_cvtsepi32_epi8(words(a));
  }
  // The rescaled int32 words before the int8 saturation, the form picked at run time.
  __attribute__((target("avx512f,avx512bw"), always_inline)) __m512i words(__m512i a) const {
    return ms.apply(_mm512_min_epi32(_mm512_max_epi32(a, lo), hi));
  }
  // The rescaled int32 words before the int8 saturation, in a form known at compile time.
  template <bool kNonNegative, bool kHigh>
  __attribute__((target("avx512f,avx512bw"), always_inline)) __m512i words(__m512i a) const {
    return ms.apply_as<kNonNegative, kHigh>(_mm512_min_epi32(_mm512_max_epi32(a, lo), hi));
  }
  // Calls fn once with a WindowForm of this window's form: a loop inside fn runs without per-vector
  // branches.
  template <class Fn>
  __attribute__((target("avx512f,avx512bw"), always_inline)) void with_form(Fn&& fn) const;
  // 64 accumulators at p requantized to 64 int8 results in order (saturate_64_s8).
  template <bool kNonNegative, bool kHigh>
  __attribute__((target("avx512f,avx512bw"), always_inline)) __m512i apply64(const int32_t* p) const {
    return saturate_64_s8(words<kNonNegative, kHigh>(_mm512_loadu_si512(p)),
                          words<kNonNegative, kHigh>(_mm512_loadu_si512(p + 16)),
                          words<kNonNegative, kHigh>(_mm512_loadu_si512(p + 32)),
                          words<kNonNegative, kHigh>(_mm512_loadu_si512(p + 48)));
  }
  template <bool kNonNegative, bool kHigh>
  __attribute__((target("avx512f,avx512bw"), always_inline)) __m128i apply_as(__m512i a) const {
    return _mm512_cvtsepi32_epi8(words<kNonNegative, kHigh>(a));
  }
};

// A Window512 with its form fixed at compile time: what with_form hands its callback.
template <bool kNonNegative, bool kHigh>
struct WindowForm {
  const Window512& w;
  __attribute__((target("avx512f,avx512bw"), always_inline)) __m128i apply(__m512i a) const {
    return w.apply_as<kNonNegative, kHigh>(a);
  }
  __attribute__((target("avx512f,avx512bw"), always_inline)) __m512i apply64(const int32_t* p) const {
    return w.apply64<kNonNegative, kHigh>(p);
  }
  __attribute__((target("avx512f,avx512bw"), always_inline)) __m512i words(__m512i a) const {
    return w.words<kNonNegative, kHigh>(a);
  }
};

template <class Fn>
__attribute__((target("avx512f,avx512bw"), always_inline)) inline void Window512::with_form(Fn&& fn) const {
  if (ms.nonnegative) {
    if (ms.high) fn(WindowForm<true, true>{*this});
    else fn(WindowForm<true, false>{*this});
  } else {
    if (ms.high) fn(WindowForm<false, true>{*this});
    else fn(WindowForm<false, false>{*this});
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

// One int8 rescale on 16 or 8 int32 lanes: the narrow form where it has one, else MulShift's.
struct Rescale512 {
  MulShift512 wide;
  __m512i mult, half;
  __m128i shift;
  bool narrow;
  __attribute__((target("avx512f,avx512bw"))) Rescale512(const num::Int8Rescale& r, const NarrowRescale& n)
      : wide(r.mult, 0, r.half, r.shifts, false), mult(_mm512_set1_epi32(n.mult)), half(_mm512_set1_epi32(n.half)),
        shift(_mm_cvtsi32_si128(int(n.shift))), narrow(n.ok) {}
  __attribute__((target("avx512f,avx512bw"), always_inline)) __m512i apply(__m512i v) const {
    if (!narrow) return wide.apply(v);
    const __m512i p = _mm512_mullo_epi32(v, mult);
    return _mm512_sra_epi32(_mm512_add_epi32(_mm512_add_epi32(p, half), _mm512_srai_epi32(p, 31)), shift);
  }
};

struct Rescale256 {
  MulShift256 wide;
  __m256i mult, half;
  __m128i shift;
  bool narrow;
  __attribute__((target("avx2"))) Rescale256(const num::Int8Rescale& r, const NarrowRescale& n)
      : wide(r.mult, 0, r.half, r.shifts, false), mult(_mm256_set1_epi32(n.mult)), half(_mm256_set1_epi32(n.half)),
        shift(_mm_cvtsi32_si128(int(n.shift))), narrow(n.ok) {}
  __attribute__((target("avx2"), always_inline)) __m256i apply(__m256i v) const {
    if (!narrow) return wide.apply(v);
    const __m256i p = _mm256_mullo_epi32(v, mult);
    return _mm256_sra_epi32(_mm256_add_epi32(_mm256_add_epi32(p, half), _mm256_srai_epi32(p, 31)), shift);
  }
};

// v saturated to int8's range, kept on int32 lanes: a requantized convolution result as the residual
// add reads it (the same value as narrowing it to int8 and widening it back, in two cheap instructions).
__attribute__((target("avx512f"), always_inline)) inline __m512i clamp_s8_words(__m512i v) {
  return _mm512_min_epi32(_mm512_max_epi32(v, _mm512_set1_epi32(-128)), _mm512_set1_epi32(127));
}

// SharedScaleSum on 16 or 8 lanes: (x + e) * mult + add, shifted and clamped.
struct SharedSum512 {
  __m512i mult, add, lo, hi;
  __m128i shift;
  __attribute__((target("avx512f,avx512bw"))) explicit SharedSum512(const SharedScaleSum& s)
      : mult(_mm512_set1_epi32(s.mult)), add(_mm512_set1_epi32(s.add)), lo(_mm512_set1_epi32(s.lo)),
        hi(_mm512_set1_epi32(s.hi)), shift(_mm_cvtsi32_si128(int(s.shift))) {}
  __attribute__((target("avx512f,avx512bw"), always_inline)) __m128i apply(__m512i x, __m512i e) const {
    return _mm512_cvtsepi32_epi8(words(x, e));
  }
  // The results as int32 lanes, already within int8's range (lo and hi are).
  __attribute__((target("avx512f,avx512bw"), always_inline)) __m512i words(__m512i x, __m512i e) const {
    return _mm512_min_epi32(_mm512_max_epi32(sum(x, e), lo), hi);
  }
  __attribute__((target("avx512f,avx512bw"), always_inline)) __m512i sum(__m512i x, __m512i e) const {
    return _mm512_sra_epi32(_mm512_add_epi32(_mm512_mullo_epi32(_mm512_add_epi32(x, e), mult), add), shift);
  }
  // The convolution's requantized value as the add reads it: saturated to int8.
  __attribute__((target("avx512f"), always_inline)) __m512i conv_word(__m512i v) const { return clamp_s8_words(v); }
};

// SharedSum512 where two of its clamps cannot change a byte (ResidualForm::trimmed): every window of the
// convolution maps its accumulators into int8 already, so its value needs no saturation before the add,
// and the add's upper bound is 127 or more, which the results' final int8 saturation applies anyway
// (words then returns values above 127 where the full form returns 127: the same bytes once saturated).
struct TrimmedSharedSum512 : SharedSum512 {
  __attribute__((target("avx512f,avx512bw"))) explicit TrimmedSharedSum512(const SharedSum512& s) : SharedSum512(s) {}
  __attribute__((target("avx512f"), always_inline)) __m512i conv_word(__m512i v) const { return v; }
  __attribute__((target("avx512f,avx512bw"), always_inline)) __m512i words(__m512i x, __m512i e) const {
    return _mm512_max_epi32(sum(x, e), lo);
  }
};

struct SharedSum256 {
  __m256i mult, add, lo, hi;
  __m128i shift;
  __attribute__((target("avx2"))) explicit SharedSum256(const SharedScaleSum& s)
      : mult(_mm256_set1_epi32(s.mult)), add(_mm256_set1_epi32(s.add)), lo(_mm256_set1_epi32(s.lo)),
        hi(_mm256_set1_epi32(s.hi)), shift(_mm_cvtsi32_si128(int(s.shift))) {}
  // Eight int8 results in the low 8 bytes, as Window256::apply.
  __attribute__((target("avx2"), always_inline)) __m128i apply(__m256i x, __m256i e) const {
    const __m256i r = _mm256_sra_epi32(_mm256_add_epi32(_mm256_mullo_epi32(_mm256_add_epi32(x, e), mult), add), shift);
    const __m256i c = _mm256_min_epi32(_mm256_max_epi32(r, lo), hi);
    const __m128i r16 = _mm_packs_epi32(_mm256_castsi256_si128(c), _mm256_extracti128_si256(c, 1));
    return _mm_packs_epi16(r16, r16);
  }
};

// The residual add (ResidualWindow) of a requantized convolution result and the add's other operand,
// both int8 lanes widened to int32: x is the add's first input, e its second. In the shared-scale form
// where the add has it.
struct Residual512 {
  Window512 out;
  Rescale512 rx, re;
  SharedSum512 sum;
  __m512i xp;
  bool plain, shared, trimmed;
  __attribute__((target("avx512f,avx512bw"))) explicit Residual512(const ResidualForm& f)
      : out(f.w.out), rx(f.w.x, f.x), re(f.w.e, f.e), sum(f.sum), xp(_mm512_set1_epi32(f.w.x_product)),
        plain(f.w.x_product != 0), shared(f.sum.ok), trimmed(f.trimmed()) {}
  __attribute__((target("avx512f,avx512bw"), always_inline)) __m128i apply(__m512i x, __m512i e) const {
    return _mm512_cvtsepi32_epi8(words(x, e));
  }
  __attribute__((target("avx512f"), always_inline)) __m512i conv_word(__m512i v) const { return clamp_s8_words(v); }
  // The results as int32 lanes before the int8 saturation.
  __attribute__((target("avx512f,avx512bw"), always_inline)) __m512i words(__m512i x, __m512i e) const {
    if (shared) return sum.words(x, e);
    const __m512i sx = plain ? _mm512_mullo_epi32(x, xp) : rx.apply(x);
    return out.words(_mm512_add_epi32(sx, re.apply(e)));
  }
  // Calls fn(add, second) once: add is this add in the form a loop keeps in registers (the shared-scale
  // sum, trimmed where it can be, by value: five vectors, where the whole struct is twenty and a store
  // through an int8 pointer could alias it; else the struct itself), second is
  // std::bool_constant<conv_second> (the convolution is the add's second input).
  template <class Fn>
  __attribute__((target("avx512f,avx512bw"), always_inline)) void with_form(bool conv_second, Fn&& fn) const {
    auto in_order = [&](const auto& add) __attribute__((target("avx512f,avx512bw"), always_inline)) {
      if (conv_second) fn(add, std::true_type{});
      else fn(add, std::false_type{});
    };
    if (trimmed) in_order(TrimmedSharedSum512(sum));
    else if (shared) in_order(SharedSum512(sum));
    else in_order(*this);
  }
};

// 16 convolution sums requantized with `form` (a WindowForm) and added to the add's other input
// (`theirs`, 16 int8) with `add` (a Residual512::with_form form), as int32 lanes before the final int8
// saturation. kConvSecond: the convolution is the add's second input.
template <bool kConvSecond, class Form, class Add>
__attribute__((target("avx512f,avx512bw"), always_inline)) inline __m512i requant_add_words(const Form& form,
                                                                                           const Add& add,
                                                                                           __m512i sums,
                                                                                           __m128i theirs) {
  const __m512i a = add.conv_word(form.words(sums)), b = _mm512_cvtepi8_epi32(theirs);
  return kConvSecond ? add.words(b, a) : add.words(a, b);
}

// The same for 16 values, saturated to 16 int8 results.
template <bool kConvSecond, class Form, class Add>
__attribute__((target("avx512f,avx512bw"), always_inline)) inline __m128i requant_add_16(const Form& form,
                                                                                        const Add& add,
                                                                                        __m512i sums,
                                                                                        __m128i theirs) {
  return _mm512_cvtsepi32_epi8(requant_add_words<kConvSecond>(form, add, sums, theirs));
}

// The same for the 64 sums at acc and the 64 int8 at other: 64 int8 results in order. Every value is the
// one Window512::apply followed by Residual512::apply gives: both saturations are to int8, the packs'
// and vpmovsdb's alike.
template <bool kConvSecond, class Form, class Add>
__attribute__((target("avx512f,avx512bw"), always_inline)) inline __m512i requant_add_64(const Form& form,
                                                                                        const Add& add,
                                                                                        const int32_t* acc,
                                                                                        const int8_t* other) {
  __m512i r[4];
  for (int q = 0; q < 4; ++q)
    r[q] = requant_add_words<kConvSecond>(form, add, _mm512_loadu_si512(acc + 16 * q),
                                          _mm_loadu_si128(reinterpret_cast<const __m128i*>(other + 16 * q)));
  return saturate_64_s8(r[0], r[1], r[2], r[3]);
}

struct Residual256 {
  Window256 out;
  Rescale256 rx, re;
  SharedSum256 sum;
  __m256i xp;
  bool plain, shared;
  __attribute__((target("avx2"))) explicit Residual256(const ResidualForm& f)
      : out(f.w.out), rx(f.w.x, f.x), re(f.w.e, f.e), sum(f.sum), xp(_mm256_set1_epi32(f.w.x_product)),
        plain(f.w.x_product != 0), shared(f.sum.ok) {}
  __attribute__((target("avx2"), always_inline)) __m128i apply(__m256i x, __m256i e) const {
    if (shared) return sum.apply(x, e);
    const __m256i sx = plain ? _mm256_mullo_epi32(x, xp) : rx.apply(x);
    return out.apply(_mm256_add_epi32(sx, re.apply(e)));
  }
};

}  // namespace softdla::cpu
#endif
