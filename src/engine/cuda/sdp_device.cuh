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
};

// Plain data, passed to kernels by value.
struct DevChain {
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
  ChainHolder(const Model& m, const Op& op, const SdpParams& p);
  const DevChain& chain() const { return chain_; }
  bool empty() const { return chain_.nsteps == 0; }

 private:
  DevChain chain_;
  std::vector<DeviceBuffer> buffers_;
};

Operands operands_of(const GpuOpIo& io);

__device__ inline int64_t clamp64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : (v > hi ? hi : v); }

__device__ inline uint64_t operand_index(const DevStep& s, uint32_t n, uint32_t c, uint32_t hw) {
  const uint64_t en = s.en == 1 ? 0 : n, ec = s.ec == 1 ? 0 : c;
  return (en * s.ec + ec) * s.ehw + (s.ehw == 1 ? 0 : hw);
}

// INT8: v is the int32-range accumulator of element (n, c, hw); returns the int8 output.
__device__ inline int8_t chain_int8(const DevChain& ch, int64_t v, uint32_t n, uint32_t c, uint32_t hw,
                                    const Operands& ops) {
  using num::rescale32;
  using num::sat32;
  for (uint32_t i = 0; i < ch.nsteps; ++i) {
    const DevStep& s = ch.steps[i];
    const int64_t operand = s.nvals == 0 ? 0 : s.ivals[s.nvals == 1 ? 0 : c];
    switch (SdpKind(s.kind)) {
      case SdpKind::kBias: v = clamp64(v + operand, INT32_MIN, INT32_MAX); break;
      case SdpKind::kScale: v = rescale32(v, operand, s.shift); break;
      case SdpKind::kPRelu: if (v < 0) v = rescale32(v, operand, s.shift); break;
      case SdpKind::kRelu: v = v > 0 ? v : 0; break;
      case SdpKind::kClip: v = clamp64(v, s.lo_i, s.hi_i); break;
      case SdpKind::kSigmoid: case SdpKind::kTanh: break;  // INT8 activations are the LUT below
      default: {
        const int8_t e = static_cast<const int8_t*>(ops.p[s.slot])[operand_index(s, n, c, hw)];
        const int64_t x = rescale32(e, s.tensor_multiplier, s.tensor_shift);
        switch (SdpKind(s.kind)) {
          case SdpKind::kEltAdd: v = sat32(v + x); break;
          case SdpKind::kEltSub: v = sat32(v - x); break;
          case SdpKind::kEltMul: v = rescale32(v, x, s.shift); break;
          case SdpKind::kEltMax: v = v > x ? v : x; break;
          default: v = v < x ? v : x; break;
        }
      }
    }
  }
  const uint32_t rc = ch.nreq == 1 ? 0 : c;
  int8_t out = num::sat8(num::rshift_rhaz(v * int64_t(ch.req_mult[rc]), ch.req_shift[rc]));
  if (ch.has_lut) out = ch.lut[out + 128];
  return out;
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
          case SdpKind::kEltMax: v = isnan(x) ? x : (v < x ? x : v); break;  // std::max, std::min
          default: v = isnan(x) ? x : (x < v ? x : v); break;
        }
      }
    }
  }
  return v;
}

}  // namespace softdla::gpu
