// The windowed INT8 epilogue's arithmetic on four output channels of one row (conv_igemm.cu's row loop):
// the requantization in its window forms (requant_window.h), the fused residual add in its shared-scale (SharedAdd) or window
// form, and the saturating pack to four int8 bytes.
#pragma once
#include <cstdint>
#include <type_traits>

#include "conv_igemm.h"  // SharedAdd
#include "requant_window.h"

namespace softdla::gpu::igemm_s8 {

// Flags of the windowed epilogue: every channel's window has kNonNegative; the fused residual add's
// output window has it; the add's first input is rescaled by a plain product; the add runs in its
// shared-scale form (SharedAdd, conv_igemm.h; the two flags before it then do not matter); with
// kConvNonNegative, every channel's shift is 32 or more. With kAddShared: kAddInRange, every channel's
// rescaled value lies in int8 already (no saturation before the add); kAddHighSat, the add's upper
// clamp is 127 (the saturating pack does it).
constexpr int kConvNonNegative = 1, kAddNonNegative = 2, kAddPlainX = 4, kAddShared = 8, kConvHigh = 16,
              kAddInRange = 32, kAddHighSat = 64;

// Four int32 values saturated to int8 and packed, value 0 in the lowest byte.
__device__ __forceinline__ uint32_t pack_sat4(int32_t v0, int32_t v1, int32_t v2, int32_t v3) {
  uint32_t high, out;
  asm("cvt.pack.sat.s8.s32.b32 %0, %1, %2, 0;\n" : "=r"(high) : "r"(v3), "r"(v2));
  asm("cvt.pack.sat.s8.s32.b32 %0, %1, %2, %3;\n" : "=r"(out) : "r"(v1), "r"(v0), "r"(high));
  return out;
}

// Byte k of v, sign-extended: one byte permute (a selector nibble with bit 3 set replicates the sign of
// the byte it selects).
__device__ __forceinline__ int32_t sign_extended_byte(uint32_t v, int k) {
  const uint32_t sel = uint32_t(k) | uint32_t(k | 8) * 0x1110u;
  uint32_t r;
  asm("prmt.b32 %0, %1, 0, %2;\n" : "=r"(r) : "r"(v), "r"(sel));
  return int32_t(r);
}

// The residual add in its shared-scale form on four of this convolution's rescaled values (before their
// int8 saturation) and the four packed int8 values of the other input at the same positions: the result
// depends on x + e alone, so which input the convolution computes does not matter.
// kForm: kAddShared with kAddInRange and kAddHighSat as they apply (steps the flags make redundant are left
// out).
template <int kForm>
__device__ __forceinline__ uint32_t shared_add4(const SharedAdd& s, const int32_t (&mine)[4], uint32_t other) {
  int32_t r[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const int32_t x = (kForm & kAddInRange) ? mine[k] : min(max(mine[k], -128), 127);
    const int32_t e = sign_extended_byte(other, k);
    const int32_t v = ((x + e) * s.mult + s.add) >> s.shift;
    r[k] = (kForm & kAddHighSat) ? max(v, s.lo) : min(max(v, s.lo), s.hi);
  }
  return pack_sat4(r[0], r[1], r[2], r[3]);
}

// The residual add (requant_window.h) on four packed int8 values of this convolution and the four
// same-position values of the other input; `swapped`: the convolution computes the add's second input.
// kForm: kAddNonNegative | kAddPlainX, as residual_window_value's template flags.
template <int kForm>
__device__ __forceinline__ uint32_t residual4(const num::ResidualWindow& w, uint32_t mine, uint32_t other, bool swapped) {
  const uint32_t xs = swapped ? other : mine, es = swapped ? mine : other;
  int32_t v[4];
#pragma unroll
  for (int k = 0; k < 4; ++k)
    v[k] = num::residual_window_value<(kForm & kAddNonNegative) != 0, (kForm & kAddPlainX) != 0>(
        int32_t(int8_t(xs >> (8 * k))), int32_t(int8_t(es >> (8 * k))), w);
  return pack_sat4(v[0], v[1], v[2], v[3]);
}

// The windowed requantization of four output channels (requant_window.h), held in registers.
struct Windows4 {
  num::RequantWindow q[4];
  __device__ void load(const num::RequantWindow* w) {  // shared memory
#pragma unroll
    for (int k = 0; k < 4; ++k) q[k] = w[k];
  }
  // kConv: 0 any window, 1 every window has kNonNegative, 2 that and every shift is 32 or more (the
  // value is the high word of the product, shifted by the rest: no funnel shift).
  template <int kConv>
  __device__ int32_t value(int32_t a, int k) const {
    if constexpr (kConv == 2)
      return int32_t(uint32_t(uint64_t(num::window_product(a, q[k])) >> 32)) >> ((q[k].shifts >> 8) & 255u);
    else return kConv ? num::requant_window_nonnegative(a, q[k]) : num::requant_window_value(a, q[k]);
  }
  template <int kConv>
  __device__ uint32_t apply(int4 acc) const {
    return pack_sat4(value<kConv>(acc.x, 0), value<kConv>(acc.y, 1), value<kConv>(acc.z, 2), value<kConv>(acc.w, 3));
  }
};

// One 4-byte group of the output: the group's accumulators through the requantization and, when
// `fused`, the residual add with the other input's 4 bytes at the same position (kAdd: kAddShared, or
// kAddNonNegative | kAddPlainX for the window form).
template <int kConv, int kAdd>
__device__ __forceinline__ uint32_t window_group(const Windows4& q, int4 acc, int fused, uint32_t other,
                                                 const SharedAdd& shared, const num::ResidualWindow& residual) {
  if constexpr ((kAdd & kAddShared) != 0) {
    const int32_t mine[4] = {q.template value<kConv>(acc.x, 0), q.template value<kConv>(acc.y, 1),
                             q.template value<kConv>(acc.z, 2), q.template value<kConv>(acc.w, 3)};
    return shared_add4<kAdd>(shared, mine, other);  // kAddShared: always fused
  } else {
    const uint32_t out = q.template apply<kConv>(acc);
    return fused ? residual4<kAdd>(residual, out, other, fused == 2) : out;
  }
}

// Calls f(conv_form, add_form) with the flags' forms as integral constants (one copy of f per form, so
// that each is straight-line code).
template <class F>
__device__ __forceinline__ void with_window_forms(int flags, F&& f) {
  using std::integral_constant;
  auto with_add_form = [&](auto conv_form) {
    if (flags & kAddShared) {
      switch (flags & (kAddInRange | kAddHighSat)) {
        case 0: return f(conv_form, integral_constant<int, kAddShared>{});
        case kAddInRange: return f(conv_form, integral_constant<int, kAddShared | kAddInRange>{});
        case kAddHighSat: return f(conv_form, integral_constant<int, kAddShared | kAddHighSat>{});
        default: return f(conv_form, integral_constant<int, kAddShared | kAddInRange | kAddHighSat>{});
      }
    }
    switch (flags & (kAddNonNegative | kAddPlainX)) {
      case 0: return f(conv_form, integral_constant<int, 0>{});
      case kAddNonNegative: return f(conv_form, integral_constant<int, kAddNonNegative>{});
      case kAddPlainX: return f(conv_form, integral_constant<int, kAddPlainX>{});
      default: return f(conv_form, integral_constant<int, kAddNonNegative | kAddPlainX>{});
    }
  };
  if (!(flags & kConvNonNegative)) with_add_form(integral_constant<int, 0>{});
  else if (flags & kConvHigh) with_add_form(integral_constant<int, 2>{});
  else with_add_form(integral_constant<int, 1>{});
}

}  // namespace softdla::gpu::igemm_s8
