// The SDP post-processing stage (docs/NUMERICS.md §SDP) on the device: the same steps, in the same
// order, with the same integer arithmetic as cpu::SdpChain, evaluated per element so that it can be
// fused into any kernel's epilogue (convolution, deconvolution, the standalone SDP op).
#pragma once
#include <cstdint>
#include <vector>

#include "device_elem.cuh"
#include "gpu_ops.h"
#include "model.h"
#include "numerics.h"

namespace softdla::gpu {

inline constexpr int kMaxSdpSteps = 16;
inline constexpr int kMaxOperands = 8;

struct DevStep {
  uint8_t kind = 0, shift = 0, tensor_shift = 0, slot = 0;
  int32_t tensor_multiplier = 1, lo_i = 0, hi_i = 0;
  float lo = 0, hi = 0;
  uint32_t nvals = 0;           // 1: one value for every channel, else one per channel
  const int32_t* ivals = nullptr;
  const float* fvals = nullptr;
  uint32_t en = 1, ec = 1, ehw = 1;  // element-wise operand shape (N, C, H*W)
  uint8_t nhwc = 0;                  // the operand is stored channels-last (channels_last.h)
  uint8_t full = 0;                  // the operand has the output's shape (no broadcast)
};

// The residual-add chain of ResNet-style blocks, [Scale]? EltAdd [ReLU | Clip]? then requantization,
// with a full-size channels-last operand: recognized at load time and evaluated without the step
// interpreter (chain_int8_run16).
struct DevResidual {
  int valid = 0;
  int has_scale = 0;
  uint32_t nscale = 0;             // 1: one scale for every channel, else one per channel
  const int32_t* scale = nullptr;
  uint8_t scale_shift = 0, slot = 0, tensor_shift = 0;
  int32_t tensor_multiplier = 1;
  int32_t lo = INT32_MIN, hi = INT32_MAX;
};

// Plain data, passed to kernels by value.
struct DevChain {
  // When the whole chain is a function of the element and one same-position element of a full-size
  // channels-last operand (uniform parameters, one requantization): its 256 x 256 outputs, indexed by
  // (uint8 input << 8) | uint8 operand, built on the device with chain_int8 itself at load time.
  const int8_t* pair_table = nullptr;
  uint8_t pair_slot = 0;
  DevResidual residual;
  uint32_t nsteps = 0;
  DevStep steps[kMaxSdpSteps];
  uint32_t nreq = 0;
  const int32_t* req_mult = nullptr;
  const uint8_t* req_shift = nullptr;
  int has_lut = 0;
  int8_t lut[256] = {};
  int fp16 = 0;  // element-wise operands of float chains are fp16 (else fp32)
};

struct Operands {
  const void* p[kMaxOperands] = {};
};

// Owns the device arrays a DevChain points into.
class ChainHolder {
 public:
  // channels_last: per tensor, 1 when stored NHWC (element-wise operands are read accordingly).
  ChainHolder(const Model& m, const Op& op, const SdpParams& p, const std::vector<uint8_t>* channels_last);
  const DevChain& chain() const { return chain_; }
  bool empty() const { return chain_.nsteps == 0; }

 private:
  void recognize_residual();  // fills chain_.residual when the chain has that form
  void build_pair_table();    // fills chain_.pair_table when the chain has that form
  DevChain chain_;
  std::vector<DeviceBuffer> buffers_;
};

Operands operands_of(const GpuOpIo& io);


__device__ inline uint64_t operand_index(const DevStep& s, uint32_t n, uint32_t c, uint32_t hw) {
  const uint64_t en = s.en == 1 ? 0 : n, ec = s.ec == 1 ? 0 : c, ehw = s.ehw == 1 ? 0 : hw;
  return s.nhwc ? (en * s.ehw + ehw) * s.ec + ec : (en * s.ec + ec) * s.ehw + ehw;
}

// ---- INT8 steps in 32-bit registers: every step leaves an int32-range value (docs/NUMERICS.md), so
// only the products are widened, with one 32 x 32 -> 64-bit multiply. ----
__device__ __forceinline__ int32_t add_sat(int32_t a, int32_t b) {  // clamp(a + b) to int32
  int32_t r;
  asm("add.sat.s32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
__device__ __forceinline__ int32_t sub_sat(int32_t a, int32_t b) {
  int32_t r;
  asm("sub.sat.s32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  return r;
}
// num::rescale32 for int32 operands.
__device__ __forceinline__ int32_t rescale_i32(int32_t v, int32_t m, unsigned s) {
  return int32_t(num::sat32(num::rshift_rhaz(int64_t(v) * m, s)));
}
// The final requantization to int8.
__device__ __forceinline__ int8_t requant_i8(int32_t v, int32_t m, unsigned s) {
  return num::sat8(num::rshift_rhaz(int64_t(v) * m, s));
}

// One non-element-wise step; k is the step's value for this channel.
__device__ __forceinline__ int32_t channel_step(SdpKind kind, const DevStep& s, int32_t v, int32_t k) {
  switch (kind) {
    case SdpKind::kBias: return add_sat(v, k);
    case SdpKind::kScale: return rescale_i32(v, k, s.shift);
    case SdpKind::kPRelu: return v < 0 ? rescale_i32(v, k, s.shift) : v;
    case SdpKind::kRelu: return v > 0 ? v : 0;
    case SdpKind::kClip: return v < s.lo_i ? s.lo_i : (v > s.hi_i ? s.hi_i : v);
    default: return v;  // sigmoid/tanh: INT8 activations are the LUT
  }
}

// One element-wise step with second-tensor element e.
__device__ __forceinline__ int32_t eltwise_step(SdpKind kind, const DevStep& s, int32_t v, int8_t e) {
  const int32_t x = rescale_i32(e, s.tensor_multiplier, s.tensor_shift);
  switch (kind) {
    case SdpKind::kEltAdd: return add_sat(v, x);
    case SdpKind::kEltSub: return sub_sat(v, x);
    case SdpKind::kEltMul: return rescale_i32(v, x, s.shift);
    case SdpKind::kEltDiv: return int32_t(num::divide32(v, x, s.shift));
    case SdpKind::kEltMax: return v > x ? v : x;
    default: return v < x ? v : x;
  }
}

__device__ __forceinline__ int32_t step_value(const DevStep& s, uint32_t c) {
  return s.nvals == 0 ? 0 : s.ivals[s.nvals == 1 ? 0 : c];
}

__device__ __forceinline__ int8_t requant_and_lut(const DevChain& ch, int32_t v, uint32_t c) {
  const uint32_t rc = ch.nreq == 1 ? 0 : c;
  const int8_t out = requant_i8(v, ch.req_mult[rc], ch.req_shift[rc]);
  return ch.has_lut ? ch.lut[out + 128] : out;
}

// INT8: v is the int32-range accumulator of element (n, c, hw); returns the int8 output.
__device__ inline int8_t chain_int8(const DevChain& ch, int64_t v64, uint32_t n, uint32_t c, uint32_t hw,
                                    const Operands& ops) {
  int32_t v = int32_t(v64);
  for (uint32_t i = 0; i < ch.nsteps; ++i) {
    const DevStep& s = ch.steps[i];
    const SdpKind kind = SdpKind(s.kind);
    if (is_eltwise(kind))
      v = eltwise_step(kind, s, v, static_cast<const int8_t*>(ops.p[s.slot])[operand_index(s, n, c, hw)]);
    else
      v = channel_step(kind, s, v, step_value(s, c));
  }
  return requant_and_lut(ch, v, c);
}

// INT8 over a run of 16 channels c0..c0+15 of pixel (n, hw) of a channels-last tensor, `index` being
// the element index of channel c0: chain_int8 taken step by step over the run, so that each step is
// decoded once and full-size channels-last operands are read as one 16-byte load.
__device__ inline uint4 residual_run16(const DevChain& ch, uint4 in, uint32_t c0, uint64_t index,
                                      const Operands& ops) {
  const DevResidual& r = ch.residual;
  union { uint4 q; int8_t b[16]; } x;
  x.q = in;
  union { uint4 q; int8_t b[16]; } e8;
  e8.q = *reinterpret_cast<const uint4*>(static_cast<const int8_t*>(ops.p[r.slot]) + index);
  union { uint4 q[4]; int32_t w[16]; } mult, scale;
  union { uint4 q; uint8_t b[16]; } shift;
  const bool per_channel = ch.nreq != 1;
  if (per_channel) {
#pragma unroll
    for (int k = 0; k < 4; ++k) mult.q[k] = reinterpret_cast<const uint4*>(ch.req_mult + c0)[k];
    shift.q = *reinterpret_cast<const uint4*>(ch.req_shift + c0);
  }
  const bool scale_per_channel = r.has_scale && r.nscale != 1;
  if (scale_per_channel) {
#pragma unroll
    for (int k = 0; k < 4; ++k) scale.q[k] = reinterpret_cast<const uint4*>(r.scale + c0)[k];
  }
  const int32_t mult0 = ch.req_mult[0], scale0 = r.has_scale ? r.scale[0] : 1;
  const unsigned shift0 = ch.req_shift[0];
#pragma unroll
  for (int e = 0; e < 16; ++e) {
    int32_t v = x.b[e];
    if (r.has_scale) v = rescale_i32(v, scale_per_channel ? scale.w[e] : scale0, r.scale_shift);
    v = add_sat(v, rescale_i32(e8.b[e], r.tensor_multiplier, r.tensor_shift));
    v = v < r.lo ? r.lo : (v > r.hi ? r.hi : v);
    x.b[e] = requant_i8(v, per_channel ? mult.w[e] : mult0, per_channel ? shift.b[e] : shift0);
  }
  return x.q;
}

// The step interpreter over a run: each step decoded once for the 16 elements. One shared copy.
__device__ __noinline__ inline uint4 chain_int8_run16_steps(const DevChain& ch, uint4 in, uint32_t n, uint32_t c0,
                                                     uint32_t hw, uint64_t index, const Operands& ops) {
  union { uint4 q; int8_t b[16]; } x;
  x.q = in;
  int32_t v[16];
#pragma unroll
  for (int e = 0; e < 16; ++e) v[e] = x.b[e];
  for (uint32_t i = 0; i < ch.nsteps; ++i) {
    const DevStep& s = ch.steps[i];
    const SdpKind kind = SdpKind(s.kind);
    if (is_eltwise(kind)) {
      union { uint4 q; int8_t b[16]; } e8;
      const int8_t* src = static_cast<const int8_t*>(ops.p[s.slot]);
      if (s.full && s.nhwc) {
        e8.q = *reinterpret_cast<const uint4*>(src + index);
      } else {
#pragma unroll
        for (int e = 0; e < 16; ++e) e8.b[e] = src[operand_index(s, n, c0 + e, hw)];
      }
#pragma unroll
      for (int e = 0; e < 16; ++e) v[e] = eltwise_step(kind, s, v[e], e8.b[e]);
    } else if (s.nvals <= 1) {
      const int32_t k = step_value(s, 0);
#pragma unroll
      for (int e = 0; e < 16; ++e) v[e] = channel_step(kind, s, v[e], k);
    } else {
#pragma unroll
      for (int e = 0; e < 16; ++e) v[e] = channel_step(kind, s, v[e], s.ivals[c0 + e]);
    }
  }
#pragma unroll
  for (int e = 0; e < 16; ++e) x.b[e] = requant_and_lut(ch, v[e], c0 + e);
  return x.q;
}

// INT8 over a run of 16 channels c0..c0+15 of pixel (n, hw) of a channels-last tensor, `index` being
// the element index of channel c0: the chain of chain_int8, by the fastest of three equivalent ways
// (pair table, residual form, step interpreter).
__device__ __forceinline__ uint4 chain_int8_run16(const DevChain& ch, uint4 in, uint32_t n, uint32_t c0, uint32_t hw,
                                                  uint64_t index, const Operands& ops) {
  if (ch.pair_table) {
    union { uint4 q; uint8_t b[16]; } x, e8;
    x.q = in;
    e8.q = *reinterpret_cast<const uint4*>(static_cast<const int8_t*>(ops.p[ch.pair_slot]) + index);
#pragma unroll
    for (int e = 0; e < 16; ++e) x.b[e] = uint8_t(__ldg(ch.pair_table + (uint32_t(x.b[e]) << 8 | e8.b[e])));
    return x.q;
  }
  if (ch.residual.valid) return residual_run16(ch, in, c0, index, ops);
  return chain_int8_run16_steps(ch, in, n, c0, hw, index, ops);
}

__device__ inline float chain_float(const DevChain& ch, float v, uint32_t n, uint32_t c, uint32_t hw,
                                    const Operands& ops) {
  for (uint32_t i = 0; i < ch.nsteps; ++i) {
    const DevStep& s = ch.steps[i];
    const float operand = s.nvals == 0 ? 0.f : s.fvals[s.nvals == 1 ? 0 : c];
    switch (SdpKind(s.kind)) {
      case SdpKind::kBias: v += operand; break;
      case SdpKind::kScale: v *= operand; break;
      case SdpKind::kPRelu: if (v < 0) v *= operand; break;
      case SdpKind::kRelu: v = v > 0.f ? v : (isnan(v) ? v : 0.f); break;
      case SdpKind::kClip: if (!isnan(v)) v = v < s.lo ? s.lo : (s.hi < v ? s.hi : v); break;  // std::clamp
      case SdpKind::kSigmoid: v = 1.f / (1.f + expf(-v)); break;
      case SdpKind::kTanh: v = tanhf(v); break;
      default: {
        const uint64_t j = operand_index(s, n, c, hw);
        const float x = ch.fp16 ? load_f(static_cast<const uint16_t*>(ops.p[s.slot]), j)
                                : load_f(static_cast<const float*>(ops.p[s.slot]), j);
        switch (SdpKind(s.kind)) {
          case SdpKind::kEltAdd: v += x; break;
          case SdpKind::kEltSub: v -= x; break;
          case SdpKind::kEltMul: v *= x; break;
          case SdpKind::kEltDiv: v /= x; break;
          case SdpKind::kEltMax: v = isnan(x) ? x : (v < x ? x : v); break;  // std::max, std::min
          default: v = isnan(x) ? x : (x < v ? x : v); break;
        }
      }
    }
  }
  return v;
}

}  // namespace softdla::gpu
