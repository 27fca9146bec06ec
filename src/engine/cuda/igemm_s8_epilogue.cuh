// The windowed INT8 epilogue's arithmetic (conv_igemm.cu): the requantization in its window forms
// (requant_window.h), the fused residual add in its shared-scale (SharedAdd) or window form, and the
// saturating pack to int8 bytes; on four output channels of one row of parked accumulators (split-K), or
// on one thread's mma fragments with the bytes exchanged within the quad into 16-byte runs.
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

// The rescaled value of accumulator a in window q (before the int8 saturation). kConv: 0 any window, 1
// every window has kNonNegative, 2 that and every shift is 32 or more (the value is the high word of the
// product, shifted by the rest: no funnel shift).
template <int kConv>
__device__ __forceinline__ int32_t window_value(int32_t a, const num::RequantWindow& q) {
  if constexpr (kConv == 2)
    return int32_t(uint32_t(uint64_t(num::window_product(a, q)) >> 32)) >> ((q.shifts >> 8) & 255u);
  else return kConv ? num::requant_window_nonnegative(a, q) : num::requant_window_value(a, q);
}

// The windowed requantization of four output channels (requant_window.h), held in registers.
struct Windows4 {
  num::RequantWindow q[4];
  __device__ void load(const num::RequantWindow* w) {  // shared memory
#pragma unroll
    for (int k = 0; k < 4; ++k) q[k] = w[k];
  }
  template <int kConv>
  __device__ int32_t value(int32_t a, int k) const {
    return window_value<kConv>(a, q[k]);
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

// ---- the epilogue straight from the mma fragments (no parking) ----

// Two int32 values saturated to int8 into bytes 0 (v0) and 1 (v1), above them the low half of `high`.
__device__ __forceinline__ uint32_t pack_sat2(int32_t v0, int32_t v1, uint32_t high) {
  uint32_t out;
  asm("cvt.pack.sat.s8.s32.b32 %0, %1, %2, %3;\n" : "=r"(out) : "r"(v1), "r"(v0), "r"(high));
  return out;
}

// The requantized int8 bytes of one thread's mma accumulators (igemm_reduce's fragment layout, kMI * 16
// x 32 per warp): out[i][h][p] holds rows i * 16 + h * 8 (+ lane / 4) and the channel pairs p * 16 + 2 *
// (lane % 4) (bytes 0-1) and p * 16 + 8 + 2 * (lane % 4) (bytes 2-3). `win`: the window of the thread's
// first channel (shared memory); the thread's channels are the same in every row, so each pair's two
// windows are read once and serve its 8 rows. kWinGroups: in wgmma's layouts fragment i lies at
// channels 32 (i % kWinGroups) + .. (1: mma.sync's, every fragment on the same channels), so the windows
// read for one group serve the fragments of that group.
template <int kConv, int kMI, int kWinGroups = 1>
__device__ __forceinline__ void requant_fragments(const int32_t (&acc)[kMI][4][4], const num::RequantWindow* win,
                                                  uint32_t (&out)[kMI][2][2]) {
#pragma unroll
  for (int p = 0; p < 2; ++p) {
    uint32_t high[kMI][2];
#pragma unroll
    for (int jj = 1; jj >= 0; --jj) {  // the upper pair first: it goes into the bytes above the lower
      const int j = 2 * p + jj;
      auto pair = [&](int i, const num::RequantWindow& q0, const num::RequantWindow& q1) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int32_t v0 = window_value<kConv>(acc[i][j][2 * h], q0);
          const int32_t v1 = window_value<kConv>(acc[i][j][2 * h + 1], q1);
          if (jj == 1) high[i][h] = pack_sat2(v0, v1, 0u);
          else out[i][h][p] = pack_sat2(v0, v1, high[i][h]);
        }
      };
#pragma unroll
      for (int c = 0; c < kWinGroups; ++c) {
        const num::RequantWindow q0 = win[c * 32 + j * 8], q1 = win[c * 32 + j * 8 + 1];
#pragma unroll
        for (int i = c; i < kMI; i += kWinGroups) pair(i, q0, q1);
      }
    }
  }
}

__device__ __forceinline__ uint32_t byte_perm(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;\n" : "=r"(r) : "r"(a), "r"(b), "r"(sel));
  return r;
}

// The four lanes of a quad (equal lane / 4) hold w[h][p] of requant_fragments for one i: 2 rows x 32
// channels, in 2-byte pieces. Exchanged in two steps (with lane ^ 1, then lane ^ 2) so that lane `quad`
// returns 16 contiguous bytes: row quad / 2, channels (quad % 2) * 16 .. + 15 (one 16-byte store).
__device__ __forceinline__ uint4 quad_transpose(const uint32_t (&w)[2][2], int quad) {
  const bool p = quad & 1, h = quad & 2;
  // Step 1: keep the half of the channels this lane will store, swap the other with lane ^ 1.
  uint32_t a[2], b[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    a[r] = p ? w[r][1] : w[r][0];
    b[r] = __shfl_xor_sync(0xffffffffu, p ? w[r][0] : w[r][1], 1);
  }
  // Step 2: keep the row this lane will store, swap the other with lane ^ 2. Then a_own comes from this
  // lane, b_own from lane ^ 1, a_far from lane ^ 2, b_far from lane ^ 3.
  const uint32_t a_own = h ? a[1] : a[0], b_own = h ? b[1] : b[0];
  const uint32_t a_far = __shfl_xor_sync(0xffffffffu, h ? a[0] : a[1], 2);
  const uint32_t b_far = __shfl_xor_sync(0xffffffffu, h ? b[0] : b[1], 2);
  // x*: the piece from the lane of this lane's parity, y*: the other; 0: from quad lanes 0-1, 1: 2-3.
  const uint32_t x0 = h ? a_far : a_own, y0 = h ? b_far : b_own, x1 = h ? a_own : a_far, y1 = h ? b_own : b_far;
  // Channels 0-3 of the 16 are the low pieces of lanes 0 and 1, 4-7 of lanes 2 and 3, 8-15 the high ones.
  const uint32_t lo = p ? 0x1054u : 0x5410u, hi = p ? 0x3276u : 0x7632u;
  return make_uint4(byte_perm(x0, y0, lo), byte_perm(x1, y1, lo), byte_perm(x0, y0, hi), byte_perm(x1, y1, hi));
}

// The fused residual add on 16 bytes of this convolution's int8 output and the other input's 16 bytes at
// the same positions (kAdd as window_group's). The shared-scale form takes the convolution's value
// saturated to int8, which the packed byte is: its in-range form applies to every byte.
template <int kAdd>
__device__ __forceinline__ uint4 add_run16(uint4 mine, uint4 other, bool swapped, const SharedAdd& shared,
                                           const num::ResidualWindow& residual) {
  const uint32_t m[4] = {mine.x, mine.y, mine.z, mine.w}, o[4] = {other.x, other.y, other.z, other.w};
  uint32_t r[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    if constexpr ((kAdd & kAddShared) != 0) {
      const int32_t x[4] = {sign_extended_byte(m[k], 0), sign_extended_byte(m[k], 1), sign_extended_byte(m[k], 2),
                            sign_extended_byte(m[k], 3)};
      r[k] = shared_add4<kAddShared | kAddInRange | (kAdd & kAddHighSat)>(shared, x, o[k]);
    } else {
      r[k] = residual4<kAdd>(residual, m[k], o[k], swapped);
    }
  }
  return make_uint4(r[0], r[1], r[2], r[3]);
}

// Calls f(conv_form) with the flags' requantization form as an integral constant.
template <class F>
__device__ __forceinline__ void with_conv_form(int flags, F&& f) {
  using std::integral_constant;
  if (!(flags & kConvNonNegative)) f(integral_constant<int, 0>{});
  else if (flags & kConvHigh) f(integral_constant<int, 2>{});
  else f(integral_constant<int, 1>{});
}

// Calls f(add_form) with the flags' residual add form for add_run16 (no add: 0 with fused == 0; the
// shared-scale form's kAddInRange does not matter there).
template <class F>
__device__ __forceinline__ void with_run_add_form(int flags, F&& f) {
  using std::integral_constant;
  if (flags & kAddShared) {
    if (flags & kAddHighSat) return f(integral_constant<int, kAddShared | kAddHighSat>{});
    return f(integral_constant<int, kAddShared>{});
  }
  switch (flags & (kAddNonNegative | kAddPlainX)) {
    case 0: return f(integral_constant<int, 0>{});
    case kAddNonNegative: return f(integral_constant<int, kAddNonNegative>{});
    case kAddPlainX: return f(integral_constant<int, kAddPlainX>{});
    default: return f(integral_constant<int, kAddNonNegative | kAddPlainX>{});
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
