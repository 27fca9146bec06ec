// An equivalent, cheaper form of the INT8 end of a convolution's SDP chain when that chain is
// [Bias] [ReLU | Clip] then requantization (docs/NUMERICS.md):
//
//     out = sat8(rshift_rhaz(clamp(sat32(acc + b), lo, hi) * m, s))
//
// The rescale is monotone in t = clamp(...), so beyond two thresholds of t the output is saturated and
// constant. Clamping the accumulator once, to the channel's clamp narrowed to those thresholds and
// moved into accumulator space, gives the same bytes (saturation of acc + b included) and keeps the
// rescaled value inside int32. What is left is one widening multiply-add (t * m = a * m + b * m), one
// add for the rounding, and a shift that reads only the 32-bit word the result lives in: about a third
// of the 64-bit work of the direct form. The GPU epilogue uses it; make_requant_window decides, per
// channel, whether it applies (tests/cpp/numerics_test.cpp compares the two forms).
#pragma once
#include <cstdint>
#include <cstdlib>
#include <optional>

#include "hd.h"
#include "numerics.h"

namespace softdla::num {

// One output channel's parameters, 32 bytes (two 16-byte loads on the GPU).
struct RequantWindow {
  int32_t lo, hi;     // the accumulator clamp, in accumulator space
  int32_t mult;       // m
  uint32_t shifts;    // s | (s > 32 ? s - 32 : 0) << 8 | kNonNegative
  int64_t bias_mult;  // b * m, plus 2^(s - 1) when kNonNegative
  int64_t half;       // 2^(s - 1), or 0 when kNonNegative
  // (a + b) * m is never negative (a ReLU-like clamp, m >= 0): the rounding needs no sign term and
  // its half is folded into bias_mult, so requant_window_nonnegative applies.
  static constexpr uint32_t kNonNegative = 1u << 16;
};

// The direct form, step by step as the CPU chain runs it.
SOFTDLA_HD inline int8_t requant_direct(int32_t acc, int32_t b, int32_t lo, int32_t hi, int32_t m, unsigned s) {
  int64_t t = sat32(int64_t(acc) + b);
  t = t < lo ? lo : (t > hi ? hi : t);
  return sat8(rshift_rhaz(t * m, s));
}

// The low 32 bits of (hi:lo) >> min(s, 32): one funnel shift on the GPU.
SOFTDLA_HD inline uint32_t funnel_right_clamped(uint32_t lo, uint32_t hi, unsigned s) {
#if defined(__CUDA_ARCH__)
  return __funnelshift_rc(lo, hi, s);
#else
  return uint32_t(((uint64_t(hi) << 32) | lo) >> (s < 32 ? s : 32));
#endif
}

// A right shift by s (1..62) as stored in `shifts` fields: s, and in bits 8..15 what is left past 32.
inline uint32_t encode_shift(unsigned s) { return s | (s > 32 ? s - 32 : 0) << 8; }

// v >> s (arithmetic) when the result fits in int32: a funnel shift that reads only the word the result
// lives in, then the rest of the shift.
SOFTDLA_HD inline int32_t shift_to_word(int64_t v, uint32_t shifts) {
  const uint32_t word = funnel_right_clamped(uint32_t(v), uint32_t(uint64_t(v) >> 32), shifts & 255u);
  return int32_t(word) >> ((shifts >> 8) & 255u);
}

// a * b as a 64-bit value. On the GPU spelled as one 32 x 32 -> 64 multiply, which ptxas merges with a
// following 64-bit add into one IMAD.WIDE (written in C++, int64 operands become a 64 x 64 multiply
// with sign fix-ups).
SOFTDLA_HD inline int64_t wide_product(int32_t a, int32_t b) {
#if defined(__CUDA_ARCH__)
  int64_t p;
  asm("mul.wide.s32 %0, %1, %2;" : "=l"(p) : "r"(a), "r"(b));
  return p;
#else
  return int64_t(a) * b;
#endif
}

// The accumulator clamped to the window, times m plus bias_mult: exactly (a + b) * m (+ the folded half).
SOFTDLA_HD inline int64_t window_product(int32_t acc, const RequantWindow& w) {
  int32_t a = acc > w.lo ? acc : w.lo;  // lo <= hi: max then min, one instruction each
  a = a < w.hi ? a : w.hi;
  return wide_product(a, w.mult) + w.bias_mult;
}

// The rescaled value before the int8 saturation; within int32 by construction of the window.
SOFTDLA_HD inline int32_t requant_window_value(int32_t acc, const RequantWindow& w) {
  const int64_t p = window_product(acc, w);
  return shift_to_word(p + w.half + (p >> 63), w.shifts);  // rshift_rhaz's rounding term (s >= 1)
}

// The same for a kNonNegative window: one multiply-add and the shift.
SOFTDLA_HD inline int32_t requant_window_nonnegative(int32_t acc, const RequantWindow& w) {
  return shift_to_word(window_product(acc, w), w.shifts);  // (a + b) * m + 2^(s - 1) >= 0
}

// Whether the window maps every accumulator into int8 before the saturation (the rescaled value is
// monotone in the clamped accumulator, so the window's two ends bound it): a fused residual add may then
// read the convolution's value without saturating it again.
inline bool window_in_int8(const RequantWindow& w) {
  for (int32_t a : {w.lo, w.hi}) {
    const bool nonnegative = w.shifts & RequantWindow::kNonNegative;
    const int32_t v = nonnegative ? requant_window_nonnegative(a, w) : requant_window_value(a, w);
    if (v < -128 || v > 127) return false;
  }
  return true;
}

// The channel's window, or nothing when the fast form does not apply (s == 0 or s > 62, or the rescaled
// ends of the window leave int32 — neither happens with multipliers normalized to [2^30, 2^31)).
inline std::optional<RequantWindow> make_requant_window(int32_t b, int32_t lo, int32_t hi, int32_t m, unsigned s) {
  if (s == 0 || s > 62 || lo > hi) return std::nullopt;
  auto f = [&](int64_t t) { return rshift_rhaz(t * m, s); };
  // Thresholds of t: at or below `low_end` and at or above `high_end` the int8 output no longer changes.
  int64_t low_end = INT32_MIN, high_end = INT32_MAX;
  if (m == 0) {
    low_end = high_end = 0;
  } else {
    // below(t): t is at or past the saturation at the low end of t (monotone: true up to a point).
    auto below = [&](int64_t t) { return m > 0 ? f(t) <= -128 : f(t) >= 127; };
    auto above = [&](int64_t t) { return m > 0 ? f(t) >= 127 : f(t) <= -128; };
    if (below(INT32_MIN)) {  // the last t for which below() holds
      int64_t yes = INT32_MIN, no = int64_t(INT32_MAX) + 1;
      while (no - yes > 1) {
        const int64_t mid = yes + (no - yes) / 2;
        (mid <= INT32_MAX && below(mid) ? yes : no) = mid;
      }
      low_end = yes;
    }
    if (above(INT32_MAX)) {  // the first t for which above() holds
      int64_t no = int64_t(INT32_MIN) - 1, yes = INT32_MAX;
      while (yes - no > 1) {
        const int64_t mid = no + (yes - no) / 2;
        (mid >= INT32_MIN && above(mid) ? yes : no) = mid;
      }
      high_end = yes;
    }
  }
  // clamp to [low_end, high_end] after clamp to [lo, hi] is one clamp to [L, H].
  auto clamp = [](int64_t v, int64_t a, int64_t z) { return v < a ? a : (v > z ? z : v); };
  const int64_t L = clamp(lo, low_end, high_end), H = clamp(hi, low_end, high_end);
  // In accumulator space: acc + b in [L, H]. acc is int32, so a bound past int32 never binds; a window
  // wholly past int32 would need a constant output instead (never seen; the direct form handles it).
  int64_t acc_lo = L - b, acc_hi = H - b;
  if (acc_lo > INT32_MAX || acc_hi < INT32_MIN) return std::nullopt;
  acc_lo = clamp(acc_lo, INT32_MIN, INT32_MAX), acc_hi = clamp(acc_hi, INT32_MIN, INT32_MAX);
  const int64_t f_lo = f(L), f_hi = f(H);
  for (int64_t r : {f_lo, f_hi})
    if (r < INT32_MIN || r > INT32_MAX) return std::nullopt;
  RequantWindow w;
  w.lo = int32_t(acc_lo), w.hi = int32_t(acc_hi), w.mult = m;
  w.shifts = encode_shift(s);
  w.bias_mult = int64_t(b) * m;
  w.half = int64_t(1) << (s - 1);
  if (L >= 0 && m >= 0) w.shifts |= RequantWindow::kNonNegative, w.bias_mult += w.half, w.half = 0;
  return w;
}

// The same window in the short (kNonNegative) rounding where that gives the same bytes although the
// product may be negative: rshift_rhaz's sign term changes a result only at an exact tie of a negative
// product, p = (a + b) * m = 2^(s - 1) mod 2^s with p < 0, so a window where no accumulator in [lo, hi]
// lands on one rounds every product as floor((p + 2^(s - 1)) / 2^s). The ties are the solutions of a
// linear congruence in a (found exactly; more than 2^16 of them in the window is taken as "has ties").
// Returns whether the window was changed (the GPU epilogue; tests/cpp/numerics_test.cpp checks it).
inline bool fold_rounding_sign(RequantWindow& w) {
  if (w.shifts & RequantWindow::kNonNegative) return false;
  const unsigned s = w.shifts & 255u;
  const uint64_t mask = s >= 64 ? ~uint64_t(0) : (uint64_t(1) << s) - 1;
  const int64_t m = w.mult, b = w.bias_mult, half = w.half;  // p(a) = a * m + b
  auto tie_at = [&](int64_t a) { const int64_t p = a * m + b; return p < 0 && (uint64_t(p) & mask) == uint64_t(half); };
  bool ties = false;
  if (m == 0) {
    ties = tie_at(w.lo);
  } else {
    // a * m = half - b (mod 2^s): with m = 2^v * odd, solvable when 2^v divides the right side; then
    // a = rhs / 2^v * odd^-1 (mod 2^(s - v)).
    const uint64_t rhs = (uint64_t(half) - uint64_t(b)) & mask;
    unsigned v = 0;
    while (!((uint64_t(m) >> v) & 1)) ++v;
    if (v >= s) {
      ties = rhs == 0 && (tie_at(w.lo) || tie_at(w.hi));  // p = b (mod 2^s) everywhere; p is monotone in a
    } else if (!(rhs & ((uint64_t(1) << v) - 1))) {
      const unsigned k = s - v;
      const uint64_t odd = uint64_t(m) >> v, kmask = (uint64_t(1) << k) - 1;
      uint64_t inv = odd;  // Newton's iteration: each step doubles the correct low bits (3 to start)
      for (int i = 0; i < 5; ++i) inv *= 2 - odd * inv;
      const uint64_t a0 = ((rhs >> v) * inv) & kmask;
      // The first solution at or above lo, then every 2^k up to hi.
      int64_t a = int64_t(w.lo) + int64_t((a0 - uint64_t(int64_t(w.lo))) & kmask);
      for (int n = 0; a <= int64_t(w.hi) && !ties; ++n, a += int64_t(kmask + 1)) {
        ties = n >= (1 << 16) || tie_at(a);
        if (k >= 40) break;  // 2^k past any window of int32 accumulators
      }
    }
  }
  if (ties) return false;
  w.bias_mult += w.half, w.half = 0, w.shifts |= RequantWindow::kNonNegative;
  return true;
}

// ---- The residual add: [Scale] EltAdd [ReLU | Clip] then requantization on two int8 tensors ----
//
//     out = sat8(rshift_rhaz(clamp(sat32(S(x) + T(e)), lo, hi) * m, s))
//     S(x) = sat32(rshift_rhaz(x * sm, ss))   (or S(x) = x without the Scale step)
//     T(e) = sat32(rshift_rhaz(e * tm, ts))
//
// x and e are int8, so every rescale is exact in 32 bits when its extremes (at -128 and 127) are below
// 2^30: then no sat32 can bind, the sum cannot overflow, and the requantization takes the window form.

// v * mult >> shift (round half away) for an int8 v, always with a shift of at least 1 (a shift of 0 is
// taken as mult * 2 >> 1, the same value), so one branch-free form serves every step.
struct Int8Rescale {
  int32_t mult = 2;
  uint32_t shifts = 1;  // as RequantWindow::shifts
  int64_t half = 1;
};

SOFTDLA_HD inline int32_t int8_rescale_value(int32_t v, const Int8Rescale& r) {
  const int64_t p = wide_product(v, r.mult);
  return shift_to_word(p + r.half + (p >> 63), r.shifts);
}

inline std::optional<Int8Rescale> make_int8_rescale(int32_t mult, unsigned shift) {
  if (shift > 62) return std::nullopt;
  for (int64_t v : {-128, 127})
    if (std::abs(rshift_rhaz(v * mult, shift)) >= (int64_t(1) << 30)) return std::nullopt;
  if (shift == 0) {  // |mult| < 2^23 here, so mult * 2 fits
    mult *= 2;
    shift = 1;
  }
  Int8Rescale r;
  r.mult = mult;
  r.shifts = encode_shift(shift);
  r.half = int64_t(1) << (shift - 1);
  return r;
}

struct ResidualWindow {
  Int8Rescale x, e;
  int32_t x_product = 0;  // when not 0, S(x) is exactly x * x_product (no Scale step, or one without a shift)
  RequantWindow out{};
};

// The direct form, step by step as the CPU chain runs it.
SOFTDLA_HD inline int8_t residual_direct(int32_t x, int32_t e, bool has_scale, int32_t sm, unsigned ss, int32_t tm,
                                         unsigned ts, int32_t lo, int32_t hi, int32_t m, unsigned s) {
  int64_t v = has_scale ? rescale32(x, sm, ss) : x;
  v = sat32(v + rescale32(e, tm, ts));
  v = v < lo ? lo : (v > hi ? hi : v);
  return sat8(rshift_rhaz(v * m, s));
}

// kNonNegative: the output window has that flag (a ReLU-like clamp). kPlainX: x_product is set.
template <bool kNonNegative = false, bool kPlainX = false>
SOFTDLA_HD inline int32_t residual_window_value(int32_t x, int32_t e, const ResidualWindow& w) {
  const int32_t ex = int8_rescale_value(e, w.e);
  const int32_t v = kPlainX ? x * w.x_product + ex : int8_rescale_value(x, w.x) + ex;
  return kNonNegative ? requant_window_nonnegative(v, w.out) : requant_window_value(v, w.out);
}

inline std::optional<ResidualWindow> make_residual_window(bool has_scale, int32_t sm, unsigned ss, int32_t tm,
                                                          unsigned ts, int32_t lo, int32_t hi, int32_t m, unsigned s) {
  ResidualWindow w;  // without a Scale step, x is rescaled by 1
  const auto x = has_scale ? make_int8_rescale(sm, ss) : make_int8_rescale(1, 0);
  if (!x) return std::nullopt;
  w.x = *x;
  if (!has_scale) w.x_product = 1;
  else if (ss == 0) w.x_product = sm;  // make_int8_rescale checked that 128 * sm is below 2^30
  const auto e = make_int8_rescale(tm, ts);
  const auto out = make_requant_window(0, lo, hi, m, s);
  if (!e || !out) return std::nullopt;
  w.e = *e, w.out = *out;
  return w;
}

}  // namespace softdla::num
