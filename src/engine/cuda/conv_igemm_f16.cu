// The FP16 implicit-GEMM convolution (see conv_igemm_f16.h): the loaders, pipeline, main loop and
// split-K of igemm_core.cuh with mma m16n8k16 f16 -> f32, Cp counted in bytes (two per channel).
// Inputs of up to 4 channels (images) are converted space-to-depth when the stride is 2 (2 x 2 pixels
// become one of 16 channels) and otherwise take Cp = 4 channels, 8 bytes per tap (two taps per 16-byte run).
//
// Each thread of the epilogue owns 4 output channels of the tile and walks its rows (a warp covers 256
// contiguous output bytes, stored 8 bytes per thread). Two forms:
//  - fast: the chain is [Bias] [ReLU | Clip], the output channels-last; the bias stays in registers and
//    a fused residual add (EltAdd [ReLU | Clip], either input) reads its other operand from shared
//    memory, fetched with cp.async while the reduction runs;
//  - general: any chain through the float step interpreter (chain_float), channels-last or NCHW output,
//    any fused op (the residual form, or the fused op's own chain).
// Both follow the unfused ops' arithmetic exactly: the chain in fp32 on the fp32 sum, one saturating
// rounding to fp16; a fused op then starts from that fp16 value, as it would reading it from memory.

#include <algorithm>

#include "conv_igemm_f16.h"
#include "igemm_core.cuh"
#include "sdp_forms.h"  // per_channel

namespace softdla::gpu {
namespace {

using Geo = IgemmGeometry;
using igemm::kBlockThreads;
constexpr int kEpiGeneral = 0, kEpiFast = 1;

template <int BM, int BN>
struct TileShape : igemm::TileShape<BM, BN> {
  // The fused residual add's other input for the tile (fp16), after the pipeline / parking space.
  static constexpr int kOperandBytes = BM * BN * 2;
  static constexpr int kFusedSmemBytes = igemm::TileShape<BM, BN>::kSmemBytes + kOperandBytes;
};

// The residual form on four channels: the convolution's fp16 result plus the other input's, then the
// activation (EltAdd is commutative in IEEE arithmetic, so either input may be the convolution's).
__device__ __forceinline__ uint2 residual4(uint2 mine, uint2 other, const FloatActivation& act) {
  const float4 a = float4_of(mine), b = float4_of(other);
  return half4_sat(activate4(make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w), act));
}

// kTap: bytes of one tap's channels when below 16 (8: Cp = 4 channels), else 16.
template <int BM, int BN, int kTap, int kEpi>
__global__ void __launch_bounds__(kBlockThreads, 2)  // two blocks per SM: at most 128 registers
igemm_f16_kernel(const uint8_t* __restrict x, const uint8_t* __restrict w, uint16_t* __restrict y, Geo g,
                 F16Epilogue e, const __grid_constant__ DevChain chain, const __grid_constant__ Operands ops,
                 const __grid_constant__ DevChain next, const __grid_constant__ Operands next_ops) {
  using Tile = TileShape<BM, BN>;
  extern __shared__ __align__(128) uint8_t smem[];
  const int tid = threadIdx.x;
  const uint32_t m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
  // Launched as a programmatic dependent of the previous kernel: wait for it before reading anything
  // it may have written (a no-op for a plain launch).
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  if (kEpi == kEpiFast && e.fused == 2) {  // the residual add's other input, in its own cp.async group
    const uint32_t side = uint32_t(__cvta_generic_to_shared(smem)) + Tile::kSmemBytes;
    constexpr int kChunks = BN / 8;  // 16 bytes: 8 channels
    for (int i = tid; i < BM * kChunks; i += kBlockThreads) {
      const uint32_t row = i / kChunks, c = n0 + (i % kChunks) * 8, m = m0 + row;
      const bool ok = m < g.M && c < g.K;
      igemm::cp_async16(side + (row * BN + (i % kChunks) * 8) * 2, ok ? e.operand + uint64_t(m) * g.K + c : e.operand, ok);
    }
    igemm::cp_async_commit();
  }

  const igemm::TileRows share = igemm::igemm_accumulate<igemm::MmaF16, BM, BN, kTap>(x, w, g, smem);
  const float* parked = reinterpret_cast<const float*>(smem);
  constexpr int kGroups = BN / 4, kGroupRows = kBlockThreads / kGroups;
  static_assert(BM % kGroupRows == 0, "whole sweeps");
  const uint32_t group = tid % kGroups, ch = n0 + group * 4;  // this thread's channels, the same in every row
  const int row_limit = min(share.end, int(g.M - m0));
  if (ch < g.K) {
    if constexpr (kEpi == kEpiFast) {  // channels-last output: K % 8 == 0, the group is whole
      const float4 bias = e.bias ? __ldg(reinterpret_cast<const float4*>(e.bias + ch)) : make_float4(0, 0, 0, 0);
      const uint2* other_tile = reinterpret_cast<const uint2*>(smem + Tile::kSmemBytes);
#pragma unroll 2
      for (int r = share.begin + tid / kGroups; r < row_limit; r += kGroupRows) {
        float4 v = *reinterpret_cast<const float4*>(parked + r * Tile::kParkStride + group * 4);
        if (e.bias) v = make_float4(v.x + bias.x, v.y + bias.y, v.z + bias.z, v.w + bias.w);
        uint2 out = half4_sat(activate4(v, e.act));
        if (e.fused == 2) out = residual4(out, other_tile[r * kGroups + group], e.residual_act);
        *reinterpret_cast<uint2*>(y + uint64_t(m0 + r) * g.K + ch) = out;
      }
    } else {
      const uint32_t ohw = g.OH * g.OW;
      for (int r = share.begin + tid / kGroups; r < row_limit; r += kGroupRows) {
        const uint32_t m = m0 + uint32_t(r), n = m / ohw, hw = m % ohw;
        const float* acc = parked + r * Tile::kParkStride + group * 4;
        for (uint32_t k = 0; k < 4 && ch + k < g.K; ++k) {
          const uint32_t c = ch + k;
          const uint64_t nhwc = uint64_t(m) * g.K + c;
          uint16_t out = half_sat(chain_float_call(chain, acc[k], n, c, hw, ops));
          if (e.fused == 2)
            out = half_sat(activate(float_of(out) + float_of(e.operand[nhwc]), e.residual_act));
          else if (e.fused == 1)
            out = half_sat(chain_float_call(next, float_of(out), n, c, hw, next_ops));
          y[e.output_nhwc ? nhwc : (uint64_t(n) * g.K + c) * ohw + hw] = out;
        }
      }
    }
  }
  if (gridDim.z > 1) igemm::cluster_wait();  // no block leaves while another may still read its parking space
}

// x: [N][C][HW] fp16 -> y: [N][HW][Cp] with channels C..Cp-1 zero; one thread per 8 channels of one
// pixel (one 16-byte store), or per pixel when Cp == 4 (one 8-byte store).
__global__ void to_channels_last_f16_kernel(const uint16_t* __restrict x, uint16_t* __restrict y, uint32_t N,
                                            uint32_t C, uint32_t HW, uint32_t Cp) {
  // y is a scratch copy below 2^31 bytes (checked at load): 32-bit indices.
  const uint32_t width = Cp == 4 ? 4 : 8, runs = Cp / width, total = N * HW * runs;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    // Consecutive threads take consecutive pixels of one channel run: the strided reads coalesce.
    const uint32_t q = i % HW, rest = i / HW, run = rest % runs, n = rest / runs;
    const uint16_t* src = x + (uint64_t(n) * C + run * width) * HW + q;
    union { uint4 v; uint16_t h[8]; } out;
#pragma unroll
    for (uint32_t k = 0; k < 8; ++k) out.h[k] = k < width && run * width + k < C ? src[uint64_t(k) * HW] : uint16_t(0);
    uint16_t* dst = y + ((uint64_t(n) * HW + q) * runs + run) * width;
    if (width == 8) *reinterpret_cast<uint4*>(dst) = out.v;
    else *reinterpret_cast<uint2*>(dst) = make_uint2(out.v.x, out.v.y);
  }
}

// x: [N][C][H][W] fp16, C <= 4 -> y: [N][ceil(H/2)][ceil(W/2)][16], channel (dy * 2 + dx) * 4 + c
// holding x[c][2h + dy][2w + dx] (zero past the image or C); one thread per output pixel, 32 bytes.
__global__ void space_to_depth_f16_kernel(const uint16_t* __restrict x, uint16_t* __restrict y, uint32_t N,
                                          uint32_t C, uint32_t H, uint32_t W) {
  const uint32_t H2 = (H + 1) / 2, W2 = (W + 1) / 2, total = N * H2 * W2;  // below 2^31 (checked at load)
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const uint32_t w2 = i % W2, h2 = (i / W2) % H2, n = i / (W2 * H2);
    union { uint4 v[2]; uint16_t h[16]; } out;
#pragma unroll
    for (uint32_t q = 0; q < 16; ++q) {
      const uint32_t c = q % 4, dx = (q / 4) % 2, dy = q / 8, h = 2 * h2 + dy, w = 2 * w2 + dx;
      out.h[q] = c < C && h < H && w < W ? x[((uint64_t(n) * C + c) * H + h) * W + w] : uint16_t(0);
    }
    reinterpret_cast<uint4*>(y)[2 * i] = out.v[0];
    reinterpret_cast<uint4*>(y)[2 * i + 1] = out.v[1];
  }
}

// The residual add EltAdd(second input) [ReLU | Clip] as its activation, when the chain is that.
std::optional<FloatActivation> residual_form(const Op& op, const SdpParams& p) {
  if (p.steps.empty() || p.steps[0].kind != SdpKind::kEltAdd || eltwise_operand_slot(op, p.steps[0].tensor) != 1)
    return std::nullopt;
  size_t i = 1;
  const FloatActivation act = float_activation_at(p, i);
  if (i != p.steps.size()) return std::nullopt;
  return act;
}

template <int BM, int BN, int kTap, int kEpi>
void launch(const uint8_t* x, const uint8_t* w, uint16_t* y, const Geo& g, int splits, const F16Epilogue& e,
            const DevChain& chain, const Operands& ops, const DevChain& next, const Operands& next_ops,
            cudaStream_t stream) {
  using Tile = TileShape<BM, BN>;
  const int smem = kEpi == kEpiFast && e.fused == 2 ? Tile::kFusedSmemBytes : Tile::kSmemBytes;
  igemm::launch_tiles<BM, BN>(igemm_f16_kernel<BM, BN, kTap, kEpi>, g, splits, smem, stream, x, w, y, g, e, chain,
                              ops, next, next_ops);
}

// Dynamic shared memory above 48 KB needs an opt-in per kernel (set at load time, never while a stream
// is being captured).
void allow_shared_memory() {
  auto allow = [](auto* kernel, int bytes) {
    SOFTDLA_CUDA(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  };
  allow(igemm_f16_kernel<128, 128, 16, kEpiGeneral>, TileShape<128, 128>::kSmemBytes);
  allow(igemm_f16_kernel<256, 64, 16, kEpiGeneral>, TileShape<256, 64>::kSmemBytes);
  allow(igemm_f16_kernel<128, 128, 8, kEpiGeneral>, TileShape<128, 128>::kSmemBytes);
  allow(igemm_f16_kernel<256, 64, 8, kEpiGeneral>, TileShape<256, 64>::kSmemBytes);
  allow(igemm_f16_kernel<128, 128, 16, kEpiFast>, TileShape<128, 128>::kFusedSmemBytes);
  allow(igemm_f16_kernel<256, 64, 16, kEpiFast>, TileShape<256, 64>::kFusedSmemBytes);
  allow(igemm_f16_kernel<128, 128, 8, kEpiFast>, TileShape<128, 128>::kFusedSmemBytes);
  allow(igemm_f16_kernel<256, 64, 8, kEpiFast>, TileShape<256, 64>::kFusedSmemBytes);
}

}  // namespace

bool igemm_f16_supports(const Model& m, const Op& op, const ConvParams& p) {
  const Shape& x = m.tensors[op.inputs[0]].shape;
  const Shape& y = m.tensors[op.outputs[0]].shape;
  const uint64_t limit = uint64_t(1) << 31;  // the kernel's 32-bit pixel and in-image offsets
  const uint64_t padded_input = uint64_t(x[0]) * x[2] * x[3] * ((x[1] + 7) / 8 * 8) * 2;
  return m.tensors[op.outputs[0]].dtype == DataType::kFloat16 && m.tensors[op.inputs[0]].dtype == DataType::kFloat16 &&
         p.groups == 1 && uint64_t(y[0]) * y[2] * y[3] < limit && padded_input < limit;
}

IgemmConvF16::IgemmConvF16(const Model& m, const Op& op, const ConvParams& p, const OpContext& ctx)
    : g_(std::make_unique<IgemmGeometry>()), chain_(m, op, p.post, &ctx.channels_last) {
  const Shape& x = m.tensors[op.inputs[0]].shape;
  const Shape& yv = m.tensors[op.outputs[0]].shape;
  const Constant& w = m.constants[p.weights];
  const uint32_t C = x[1], R = w.dims[2], S = w.dims[3], K = yv[1];
  const SdpStep* bias = nullptr;
  fast_ = float_fast_form(p.post, bias, act_);
  has_bias_ = bias != nullptr;
  channels_ = C, in_h_ = x[2], in_w_ = x[3];
  input_nhwc_ = ctx.channels_last[op.inputs[0]] != 0;
  output_nhwc_ = ctx.channels_last[op.outputs[0]] != 0;
  const uint16_t* src = reinterpret_cast<const uint16_t*>(w.data.data());
  auto weight = [&](uint32_t k, uint32_t c, uint32_t r, uint32_t s) { return src[((size_t(k) * C + c) * R + r) * S + s]; };
  // Images (C <= 4, never channels-last) are converted at each run. With stride 2 (the usual first
  // layer) they become space-to-depth, as in the INT8 kernel: each 2 x 2 block of pixels is one pixel of
  // 16 channels (4 x 4 with the padding), and the convolution one of stride 1 over ceil(R / 2) x
  // ceil(S / 2) taps, 32 bytes per tap. Other strides take 4 channels per tap (8 bytes).
  space_to_depth_ = C <= 4 && p.stride_h == 2 && p.stride_w == 2 && p.dilation_h == 1 && p.dilation_w == 1;
  std::vector<uint16_t> packed;
  if (space_to_depth_) {
    // Original tap r = 2 * ry + dy + off with off = pad - 2 * ceil(pad / 2) (0 or -1); the new padding
    // is ceil(pad / 2) pixels of the half-size image.
    cp_ = 16;
    const uint32_t at = (p.pad_top + 1) / 2, al = (p.pad_left + 1) / 2;
    const int32_t offy = int32_t(p.pad_top) - 2 * int32_t(at), offx = int32_t(p.pad_left) - 2 * int32_t(al);
    const uint32_t R2 = uint32_t(int32_t(R) - 1 - offy) / 2 + 1, S2 = uint32_t(int32_t(S) - 1 - offx) / 2 + 1;
    *g_ = {x[0], (x[2] + 1) / 2, (x[3] + 1) / 2, 32, K, yv[2], yv[3], R2, S2, 1, 1, 1, 1, at, al,
           x[0] * yv[2] * yv[3], (R2 * S2 * 32 + 63) / 64 * 64, 0};
    const uint32_t row = g_->kpad / 2;
    packed.assign(size_t(K) * row, 0);
    for (uint32_t k = 0; k < K; ++k)
      for (uint32_t ry = 0; ry < R2; ++ry)
        for (uint32_t rx = 0; rx < S2; ++rx)
          for (uint32_t dy = 0; dy < 2; ++dy)
            for (uint32_t dx = 0; dx < 2; ++dx) {
              const int32_t r = int32_t(2 * ry + dy) + offy, s = int32_t(2 * rx + dx) + offx;
              if (r < 0 || r >= int32_t(R) || s < 0 || s >= int32_t(S)) continue;
              for (uint32_t c = 0; c < C; ++c)
                packed[size_t(k) * row + (ry * S2 + rx) * 16 + (dy * 2 + dx) * 4 + c] = weight(k, c, uint32_t(r), uint32_t(s));
            }
  } else {
    cp_ = C <= 4 ? 4 : (C + 7) / 8 * 8;
    const uint32_t cp_bytes = cp_ * 2;
    *g_ = {x[0], x[2], x[3], cp_bytes, K, yv[2], yv[3], R, S, p.stride_h, p.stride_w, p.dilation_h, p.dilation_w,
           p.pad_top, p.pad_left, x[0] * yv[2] * yv[3], (R * S * cp_bytes + 63) / 64 * 64, 0};
    g_->pointwise = R == 1 && S == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_top == 0 && p.pad_left == 0 &&
                    yv[2] == x[2] && yv[3] == x[3] && cp_bytes % 16 == 0;
    // Weights [K][C][R][S] fp16 -> [K][(r, s, c) with c padded to Cp][.. kpad bytes], zeros in the padding.
    const uint32_t row = g_->kpad / 2;
    packed.assign(size_t(K) * row, 0);
    for (uint32_t k = 0; k < K; ++k)
      for (uint32_t c = 0; c < C; ++c)
        for (uint32_t r = 0; r < R; ++r)
          for (uint32_t s = 0; s < S; ++s) packed[size_t(k) * row + (r * S + s) * cp_ + c] = weight(k, c, r, s);
  }
  weights_ = upload(packed);
  if (!input_nhwc_) convert_bytes_ = (uint64_t(g_->N) * g_->H * g_->W * g_->Cp + 255) / 256 * 256;
  if (has_bias_) bias_ = upload(per_channel<float>(bias->fvalues, K, 0.f));
  // Narrow layers waste half of a 128-channel tile: take 256 pixels x 64 channels instead.
  tile_ = K <= 64 ? 1 : 0;
  const uint32_t BM = tile_ ? 256 : 128, BN = tile_ ? 64 : 128;
  splits_ = igemm::choose_splits(uint64_t((g_->M + BM - 1) / BM) * ((K + BN - 1) / BN), int(g_->kpad / 64), int(BM));
  allow_shared_memory();
}

IgemmConvF16::~IgemmConvF16() = default;

bool IgemmConvF16::fuse_next(const Model& m, const Op& next, size_t input, const OpContext& ctx) {
  const auto* p = std::get_if<SdpParams>(&next.params);
  if (!p || p->steps.size() > size_t(kMaxSdpSteps) || m.tensors[next.outputs[0]].dtype != DataType::kFloat16 ||
      m.tensors[next.inputs[input]].shape != m.tensors[next.outputs[0]].shape)
    return false;
  // The residual form: both inputs channels-last with the output's shape. The step interpreter takes
  // any chain, but only as the convolution computing the op's first input.
  const Shape& out = m.tensors[next.outputs[0]].shape;
  const bool same_position = next.inputs.size() == 2 && ctx.channels_last[next.outputs[0]] &&
                             ctx.channels_last[next.inputs[0]] && ctx.channels_last[next.inputs[1]] &&
                             m.tensors[next.inputs[0]].shape == out && m.tensors[next.inputs[1]].shape == out &&
                             m.tensors[next.inputs[0]].dtype == DataType::kFloat16 &&
                             m.tensors[next.inputs[1]].dtype == DataType::kFloat16;
  const auto residual = same_position ? residual_form(next, *p) : std::nullopt;
  if (input == 1 && !residual) return false;
  fused_.emplace(m, next, *p, &ctx.channels_last);
  residual_ = residual;
  fused_swapped_ = input == 1;
  output_nhwc_ = ctx.channels_last[next.outputs[0]] != 0;
  return true;
}

void IgemmConvF16::enqueue(const GpuOpIo& io, const OpContext&, cudaStream_t stream) const {
  const uint8_t* x = static_cast<const uint8_t*>(io.inputs[0]);
  if (!input_nhwc_) {
    const uint16_t* in = static_cast<const uint16_t*>(io.inputs[0]);
    uint16_t* converted = static_cast<uint16_t*>(io.scratch);
    if (space_to_depth_) {
      space_to_depth_f16_kernel<<<blocks_for(uint64_t(g_->N) * g_->H * g_->W), kThreads, 0, stream>>>(
          in, converted, g_->N, channels_, in_h_, in_w_);
      check_launch("space_to_depth_f16_kernel");
    } else {
      const uint32_t width = cp_ == 4 ? 4 : 8, hw = in_h_ * in_w_;
      to_channels_last_f16_kernel<<<blocks_for(uint64_t(g_->N) * hw * (cp_ / width)), kThreads, 0, stream>>>(
          in, converted, g_->N, channels_, hw, cp_);
      check_launch("to_channels_last_f16_kernel");
    }
    x = reinterpret_cast<const uint8_t*>(converted);
  }
  GpuOpIo next_io;
  next_io.inputs = io.fused_inputs;
  const Operands ops = operands_of(io), next_ops = operands_of(next_io);
  F16Epilogue e;
  e.bias = has_bias_ ? bias_.as<float>() : nullptr;
  e.act = act_;
  e.output_nhwc = output_nhwc_;
  e.fused = !fused_ ? 0 : residual_ ? 2 : 1;
  if (residual_) {
    e.residual_act = *residual_;
    e.operand = static_cast<const uint16_t*>(next_io.inputs[fused_swapped_ ? 0 : 1]);
  }
  const DevChain& next = fused_ ? fused_->chain() : chain_.chain();
  uint16_t* y = static_cast<uint16_t*>(io.output);
  // The fast epilogue: the short chain, a channels-last output, a fused op (if any) in the residual form.
  const bool fast = fast_ && output_nhwc_ && (!fused_ || residual_);
  auto go = [&](auto tile_tag, auto tap_tag, auto epi_tag) {
    constexpr int BM = decltype(tile_tag)::value ? 256 : 128, BN = decltype(tile_tag)::value ? 64 : 128;
    launch<BM, BN, decltype(tap_tag)::value, decltype(epi_tag)::value>(x, weights_.as<uint8_t>(), y, *g_, splits_, e,
                                                                        chain_.chain(), ops, next, next_ops, stream);
  };
  auto with_epilogue = [&](auto tile_tag, auto tap_tag) {
    fast ? go(tile_tag, tap_tag, std::integral_constant<int, kEpiFast>{})
         : go(tile_tag, tap_tag, std::integral_constant<int, kEpiGeneral>{});
  };
  auto with_tap = [&](auto tile_tag) {
    g_->Cp == 8 ? with_epilogue(tile_tag, std::integral_constant<int, 8>{})
             : with_epilogue(tile_tag, std::integral_constant<int, 16>{});
  };
  tile_ ? with_tap(std::true_type{}) : with_tap(std::false_type{});
}

}  // namespace softdla::gpu
