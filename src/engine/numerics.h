// The exact arithmetic primitives of docs/NUMERICS.md. Every backend must produce what these produce;
// the CPU kernels call them directly and the CUDA kernels mirror them line for line.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "hd.h"

namespace softdla::num {

SOFTDLA_HD inline int64_t sat32(int64_t v) { return v < INT32_MIN ? INT32_MIN : (v > INT32_MAX ? INT32_MAX : v); }
SOFTDLA_HD inline int8_t sat8(int64_t v) { return int8_t(v < -128 ? -128 : (v > 127 ? 127 : v)); }

// Arithmetic right shift by s with round half away from zero. |v| < 2^62, 0 <= s <= 62.
// Rounding the magnitude, sign(v) * floor((|v| + half) / 2^s), equals floor((v + half - 1) / 2^s) for
// v < 0 and s > 0 (as 2^s - half = half), so one add and one arithmetic shift do it: branch-free, so
// loops over it vectorize, and cheap in the GPU's emulated 64-bit arithmetic.
SOFTDLA_HD inline int64_t rshift_rhaz(int64_t v, unsigned s) {
  const int64_t half = (int64_t(1) << s) >> 1;  // 0 when s == 0
  const int64_t below = (v < 0) & (s > 0);      // the -1 for negative values
  return (v + half - below) >> s;
}

// v * m >> s (round half away), saturated to int32: every integer rescale in the pipeline.
SOFTDLA_HD inline int64_t rescale32(int64_t v, int64_t m, unsigned s) { return sat32(rshift_rhaz(v * m, s)); }

// a / b rounded half away from zero, b > 0 (bilinear resize weights).
SOFTDLA_HD inline int64_t div_rhaz(int64_t a, int64_t b) {
  return a >= 0 ? (2 * a + b) / (2 * b) : -((-2 * a + b) / (2 * b));
}

// INT8 element-wise division: (v << s) / e rounded half away from zero, saturated to int32; e = 0 gives
// the int32 bound with v's sign (0 / 0 = 0). v is saturated to int32 first, so with s <= 30 (the
// loadable checker's limit) 2|v << s| + |e| stays below 2^63 whatever the accumulator held.
SOFTDLA_HD inline int64_t divide32(int64_t v, int64_t e, unsigned s) {
  v = sat32(v);
  if (e == 0) return v > 0 ? INT32_MAX : (v < 0 ? INT32_MIN : 0);
  const int64_t a = v * (int64_t(1) << (s > 30 ? 30 : s));
  const int64_t q = div_rhaz(a < 0 ? -a : a, e < 0 ? -e : e);
  return sat32((a < 0) != (e < 0) ? -q : q);
}

// Q16 reciprocal of a pooling window extent 1..8: round_half_away(65536 / k).
SOFTDLA_HD inline int64_t q16_reciprocal(unsigned k) { return (2 * 65536 + k) / (2 * int64_t(k)); }

// float -> int8: round half away from zero, saturate; NaN -> 0.
SOFTDLA_HD inline int8_t quantize(float x) {
  if (x != x) return 0;  // NaN
  const float r = roundf(x);
  return r >= 127.f ? int8_t(127) : (r <= -128.f ? int8_t(-128) : int8_t(r));
}

// ---- IEEE binary16 ----
SOFTDLA_HD inline float bits_to_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, 4);
  return f;
#endif
}
SOFTDLA_HD inline uint32_t float_to_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
#endif
}

SOFTDLA_HD inline float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else {  // subnormal: normalize
    int e = -1;
    do { man <<= 1; ++e; } while (!(man & 0x400));
    bits = sign | (uint32_t(112 - e) << 23) | ((man & 0x3ff) << 13);
  }
  return bits_to_float(bits);
}

// float -> binary16, round to nearest even, saturating to +-65504 (never infinity); every NaN becomes the
// one quiet NaN 0x7e00, whatever its sign and payload (which an accumulation's order would otherwise decide).
SOFTDLA_HD inline uint16_t float_to_half(float f) {
  const uint32_t x = float_to_bits(f);
  const uint16_t sign = uint16_t((x >> 16) & 0x8000);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return 0x7e00;                 // NaN
  if (ax >= 0x477ff000u) return sign | 0x7bff;         // rounds to >= 65520 or inf: saturate
  if (ax >= 0x38800000u) {                             // normal half range
    const uint32_t mant = ax & 0x7fffff;
    const uint32_t exp = (ax >> 23) - 112;
    uint32_t h = (exp << 10) | (mant >> 13);
    const uint32_t rest = mant & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;  // carries into exponent correctly
    return sign | uint16_t(h > 0x7bff ? 0x7bff : h);
  }
  if (ax < 0x33000000u) return sign;                   // below half of the smallest subnormal
  // subnormal result: shift the full 24-bit significand
  const uint32_t mant = (ax & 0x7fffff) | 0x800000;
  const unsigned shift = 126 - (ax >> 23);             // 14..24
  uint32_t h = mant >> shift;
  const uint32_t rest = mant & ((1u << shift) - 1), halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (h & 1))) ++h;
  return sign | uint16_t(h);
}

SOFTDLA_HD inline float round_to_half(float f) { return half_to_float(float_to_half(f)); }

}  // namespace softdla::num
