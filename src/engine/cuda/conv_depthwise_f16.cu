#include "conv_depthwise_f16.h"

#include <vector>

#include "half_device.cuh"
#include "sdp_forms.h"  // per_channel

namespace softdla::gpu {
namespace {

struct DwShape {
  uint32_t N, C, H, W, OH, OW, R, S, sh, sw, dh, dw, pt, pl;
};

// Eight fp16 values as floats.
__device__ __forceinline__ void widen8(uint4 q, float (&v)[8]) {
  const uint32_t w[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const float2 f = float2_of(w[k]);
    v[2 * k] = f.x, v[2 * k + 1] = f.y;
  }
}

// One thread per 8 channels (c0..c0+7) of one output pixel. weights: fp32 [R * S][C] (a tap's channels
// adjacent). The sum runs over the taps in (r, s) order in fp32 as the direct kernel's; then the chain
// in fp32 and one saturating rounding (docs/NUMERICS.md §2). kFast: the chain is [Bias] [ReLU | Clip].
template <bool kInNhwc, bool kOutNhwc, bool kFast>
__global__ void depthwise_f16_kernel(const uint16_t* __restrict x, const float* __restrict weights,
                                     uint16_t* __restrict y, DwShape g, const float* __restrict bias,
                                     FloatActivation act, const __grid_constant__ DevChain chain,
                                     const __grid_constant__ Operands ops) {
  const uint32_t runs = g.C / 8, ohw = g.OH * g.OW, total = g.N * ohw * runs;  // below 2^31 (checked at load)
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    // Consecutive threads take consecutive channel runs of one pixel: channels-last loads coalesce.
    const uint32_t run = i % runs, pixel = i / runs, c0 = run * 8;
    const uint32_t n = pixel / ohw, p = pixel % ohw, oh = p / g.OW, ow = p % g.OW;
    const int32_t ih0 = int32_t(oh * g.sh) - int32_t(g.pt), iw0 = int32_t(ow * g.sw) - int32_t(g.pl);
    float acc[8] = {};
    for (uint32_t r = 0; r < g.R; ++r) {
      const int32_t ih = ih0 + int32_t(r * g.dh);
      if (ih < 0 || ih >= int32_t(g.H)) continue;
      for (uint32_t s = 0; s < g.S; ++s) {
        const int32_t iw = iw0 + int32_t(s * g.dw);
        if (iw < 0 || iw >= int32_t(g.W)) continue;
        float v[8];
        if constexpr (kInNhwc) {
          widen8(__ldg(reinterpret_cast<const uint4*>(x + ((n * g.H + uint32_t(ih)) * g.W + uint32_t(iw)) * g.C + c0)), v);
        } else {
#pragma unroll
          for (int k = 0; k < 8; ++k) v[k] = float_of(x[((n * g.C + c0 + k) * g.H + uint32_t(ih)) * g.W + uint32_t(iw)]);
        }
        const float4* wt = reinterpret_cast<const float4*>(weights + (r * g.S + s) * g.C + c0);
        const float4 w0 = __ldg(wt), w1 = __ldg(wt + 1);
        const float wk[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
#pragma unroll
        for (int k = 0; k < 8; ++k) acc[k] = fmaf(wk[k], v[k], acc[k]);
      }
    }
    union { uint4 q; uint32_t w[4]; uint16_t h[8]; } out;
    if constexpr (kFast) {
      float b[8] = {};
      if (bias) {
        const float4 b0 = __ldg(reinterpret_cast<const float4*>(bias + c0)), b1 = __ldg(reinterpret_cast<const float4*>(bias + c0) + 1);
        b[0] = b0.x, b[1] = b0.y, b[2] = b0.z, b[3] = b0.w, b[4] = b1.x, b[5] = b1.y, b[6] = b1.z, b[7] = b1.w;
      }
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        float lo = acc[2 * k], hi = acc[2 * k + 1];
        if (bias) lo += b[2 * k], hi += b[2 * k + 1];  // no Bias step: no add (it would turn -0 into +0)
        out.w[k] = half2_sat(activate(lo, act), activate(hi, act));
      }
    } else {
#pragma unroll
      for (int k = 0; k < 8; ++k) out.h[k] = half_sat(chain_float_call(chain, acc[k], n, c0 + k, p, ops));
    }
    if constexpr (kOutNhwc) {
      *reinterpret_cast<uint4*>(y + pixel * g.C + c0) = out.q;
    } else {
#pragma unroll
      for (int k = 0; k < 8; ++k) y[(n * g.C + c0 + k) * ohw + p] = out.h[k];
    }
  }
}

class DepthwiseF16 final : public GpuOp {
 public:
  DepthwiseF16(const Model& m, const Op& op, const ConvParams& p, const OpContext& ctx)
      : chain_(m, op, p.post, &ctx.channels_last), in_nhwc_(ctx.channels_last[op.inputs[0]] != 0),
        out_nhwc_(ctx.channels_last[op.outputs[0]] != 0) {
    const Shape& x = m.tensors[op.inputs[0]].shape;
    const Shape& yv = m.tensors[op.outputs[0]].shape;
    const Constant& w = m.constants[p.weights];
    g_ = {x[0], x[1], x[2], x[3], yv[2], yv[3], w.dims[2], w.dims[3], p.stride_h, p.stride_w, p.dilation_h,
          p.dilation_w, p.pad_top, p.pad_left};
    // [C][1][R][S] fp16 -> fp32 [R * S][C].
    const uint16_t* src = reinterpret_cast<const uint16_t*>(w.data.data());
    const uint32_t taps = g_.R * g_.S;
    std::vector<float> packed(size_t(taps) * g_.C);
    for (uint32_t c = 0; c < g_.C; ++c)
      for (uint32_t t = 0; t < taps; ++t) packed[size_t(t) * g_.C + c] = num::half_to_float(src[size_t(c) * taps + t]);
    weights_ = upload(packed);
    const SdpStep* bias = nullptr;
    fast_ = float_fast_form(p.post, bias, act_);
    if (fast_ && bias) bias_ = upload(per_channel<float>(bias->fvalues, g_.C, 0.f));
  }

  void enqueue(const GpuOpIo& io, const OpContext&, cudaStream_t stream) const override {
    const Operands ops = operands_of(io);
    const uint16_t* x = static_cast<const uint16_t*>(io.inputs[0]);
    uint16_t* y = static_cast<uint16_t*>(io.output);
    const unsigned blocks = blocks_for(uint64_t(g_.N) * g_.OH * g_.OW * (g_.C / 8));
    auto go = [&](auto in_tag, auto out_tag, auto fast_tag) {
      depthwise_f16_kernel<decltype(in_tag)::value, decltype(out_tag)::value, decltype(fast_tag)::value>
          <<<blocks, kThreads, 0, stream>>>(x, weights_.as<float>(), y, g_, bias_.as<float>(), act_, chain_.chain(), ops);
    };
    auto with_fast = [&](auto in_tag, auto out_tag) {
      fast_ ? go(in_tag, out_tag, std::true_type{}) : go(in_tag, out_tag, std::false_type{});
    };
    auto with_out = [&](auto in_tag) {
      out_nhwc_ ? with_fast(in_tag, std::true_type{}) : with_fast(in_tag, std::false_type{});
    };
    in_nhwc_ ? with_out(std::true_type{}) : with_out(std::false_type{});
    check_launch("depthwise_f16_kernel");
  }

 private:
  ChainHolder chain_;
  bool in_nhwc_, out_nhwc_;
  DwShape g_{};
  bool fast_ = false;
  FloatActivation act_;
  DeviceBuffer weights_, bias_;  // bias_: the fast form's Bias step (empty: none)
};

}  // namespace

bool depthwise_f16_supports(const Model& m, const Op& op, const ConvParams& p) {
  const Tensor& x = m.tensors[op.inputs[0]];
  const Tensor& y = m.tensors[op.outputs[0]];
  const uint64_t limit = uint64_t(1) << 31;
  return x.dtype == DataType::kFloat16 && y.dtype == DataType::kFloat16 && p.groups == x.shape[1] &&
         y.shape[1] == x.shape[1] && x.shape[1] % 8 == 0 && element_count(x.shape) < limit &&
         element_count(y.shape) < limit;
}

std::unique_ptr<GpuOp> make_depthwise_f16(const Model& m, const Op& op, const ConvParams& p, const OpContext& ctx) {
  return std::make_unique<DepthwiseF16>(m, op, p, ctx);
}

}  // namespace softdla::gpu
