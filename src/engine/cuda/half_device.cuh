// FP16 epilogue pieces shared by the channels-last FP16 kernels (implicit-GEMM and depthwise
// convolutions, the standalone SDP op and pooling): the short forms of the float SDP chain, and
// packed fp16 stores that follow num::float_to_half (docs/NUMERICS.md §2) with the hardware conversion.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "sdp_device.cuh"

namespace softdla::gpu {

// A float chain's trailing activation in the short forms: 0 none, 1 ReLU, 2 Clip [lo, hi].
struct FloatActivation {
  uint8_t kind = 0;
  float lo = 0, hi = 0;
};

// An optional ReLU or Clip at step i; i moves past it.
inline FloatActivation float_activation_at(const SdpParams& p, size_t& i) {
  FloatActivation act;
  if (i < p.steps.size() && p.steps[i].kind == SdpKind::kRelu) act.kind = 1, ++i;
  else if (i < p.steps.size() && p.steps[i].kind == SdpKind::kClip) act = {2, p.steps[i].lo, p.steps[i].hi}, ++i;
  return act;
}

// The chain as [Bias] [ReLU | Clip] (convolution + BatchNorm + ReLU/ReLU6/Clip): bias (or null) and
// the activation.
inline bool float_fast_form(const SdpParams& p, const SdpStep*& bias, FloatActivation& act) {
  size_t i = 0;
  bias = nullptr;
  if (i < p.steps.size() && p.steps[i].kind == SdpKind::kBias) bias = &p.steps[i++];
  act = float_activation_at(p, i);
  return i == p.steps.size();
}

// chain_float's ReLU and Clip exactly (NaN passes; ReLU gives +0 for -0).
__device__ __forceinline__ float activate(float v, const FloatActivation& a) {
  if (a.kind == 1) return v > 0.f ? v : (isnan(v) ? v : 0.f);
  if (a.kind == 2) return isnan(v) ? v : (v < a.lo ? a.lo : (a.hi < v ? a.hi : v));
  return v;
}
__device__ __forceinline__ float4 activate4(float4 v, const FloatActivation& a) {
  return make_float4(activate(v.x, a), activate(v.y, a), activate(v.z, a), activate(v.w, a));
}

// num::float_to_half on two values (the first in the low half), by the hardware conversion: beyond
// +-65504 saturates (clamped first: rounding a value in (65504, 65520) gives 65504 either way), NaN
// becomes the one quiet NaN 0x7e00.
__device__ __forceinline__ uint32_t half2_sat(float a, float b) {
  constexpr float kMax = 65504.f;
  const float ca = a > kMax ? kMax : (a < -kMax ? -kMax : a);
  const float cb = b > kMax ? kMax : (b < -kMax ? -kMax : b);
  const __half2 h = __floats2half2_rn(ca, cb);
  uint32_t r = *reinterpret_cast<const uint32_t*>(&h);
  if (isnan(a)) r = (r & 0xffff0000u) | 0x7e00u;
  if (isnan(b)) r = (r & 0x0000ffffu) | 0x7e000000u;
  return r;
}
__device__ __forceinline__ uint2 half4_sat(float4 v) { return make_uint2(half2_sat(v.x, v.y), half2_sat(v.z, v.w)); }
__device__ __forceinline__ uint16_t half_sat(float v) { return uint16_t(half2_sat(v, 0.f) & 0xffffu); }
__device__ __forceinline__ float float_of(uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ __forceinline__ float2 float2_of(uint32_t h2) {
  return __half22float2(*reinterpret_cast<const __half2*>(&h2));
}
__device__ __forceinline__ float4 float4_of(uint2 h) {
  const float2 lo = float2_of(h.x), hi = float2_of(h.y);
  return make_float4(lo.x, lo.y, hi.x, hi.y);
}

// chain_float as one shared copy (the general paths are rare; inlined per element they only grow kernels).
__device__ __noinline__ inline float chain_float_call(const DevChain& ch, float v, uint32_t n, uint32_t c, uint32_t hw,
                                                      const Operands& ops) {
  return chain_float(ch, v, n, c, hw, ops);
}

}  // namespace softdla::gpu
