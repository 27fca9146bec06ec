#include "conv_depthwise_s8.h"

#include <vector>

#include "requant_window.h"
#include "sdp_device.cuh"
#include "sdp_forms.h"  // conv_windows

namespace softdla::gpu {
namespace {

struct DwShape {
  uint32_t N, C, H, W, OH, OW, R, S, sh, sw, dh, dw, pt, pl;
};

// Epilogues: the step interpreter (any chain), or every channel's requantization window (the chain is
// [Bias] [ReLU | Clip] requantization; requant_window.h: the same bytes), with kNonNegative on every
// channel or not.
constexpr int kEpiGeneral = 0, kEpiWindow = 1, kEpiWindowNonNegative = 2;

union Run16 {
  uint4 q;
  uint32_t w[4];
  int8_t b[16];
};

// The per-channel windows of the windowed epilogues, laid out [k][run] for channel run * 16 + k: the
// threads of a warp take consecutive runs, so each load of one k reads a few adjacent cache lines
// (laid out per channel, 16 channels x 32 bytes per thread, the loads touched a line per thread).
struct Windows {
  const int4* quads;          // lo, hi, mult, shifts
  const long long* bias_mult;
  const long long* half;      // read only by the signed form
};

// chain_int8 as one shared copy (inlined 16 times it would only grow the kernel; the general chain is rare).
__device__ __noinline__ int8_t dw_chain_int8(const DevChain& ch, int32_t v, uint32_t n, uint32_t c, uint32_t hw,
                                             const Operands& ops) {
  return chain_int8(ch, v, n, c, hw, ops);
}

// Input channels c0..c0+15 at (ih, iw), zeros outside the image (a zero input adds a zero product: the
// sum is the one that skips the tap).
template <bool kInNhwc>
__device__ __forceinline__ uint4 load_tap(const int8_t* __restrict x, const DwShape& g, uint32_t n, uint32_t c0,
                                          int32_t ih, int32_t iw) {
  Run16 v;
  v.q = make_uint4(0, 0, 0, 0);
  if (ih < 0 || ih >= int32_t(g.H) || iw < 0 || iw >= int32_t(g.W)) return v.q;
  if constexpr (kInNhwc) {
    v.q = __ldg(reinterpret_cast<const uint4*>(x + ((n * g.H + uint32_t(ih)) * g.W + uint32_t(iw)) * g.C + c0));
  } else {
#pragma unroll
    for (int k = 0; k < 16; ++k) v.b[k] = x[((n * g.C + c0 + k) * g.H + uint32_t(ih)) * g.W + uint32_t(iw)];
  }
  return v.q;
}

// acc[k] += x[k] * w[k] for 16 int8 pairs: one dp4a per channel on the input word and the weight word
// masked to that channel's byte (the other three products are zero). Exact in int32.
__device__ __forceinline__ void mac16(int32_t (&acc)[16], uint4 xq, uint4 wq) {
  const uint32_t xs[4] = {xq.x, xq.y, xq.z, xq.w}, ws[4] = {wq.x, wq.y, wq.z, wq.w};
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int b = 0; b < 4; ++b) acc[4 * j + b] = __dp4a(int(xs[j]), int(ws[j] & (0xffu << (8 * b))), acc[4 * j + b]);
}

// The 16 sums of channels run * 16.. of output pixel `pixel` through the epilogue, stored.
template <bool kOutNhwc, int kEpi>
__device__ __forceinline__ void finish(const int32_t (&acc)[16], int8_t* __restrict y, const DwShape& g,
                                       const Windows& windows, const DevChain& chain, const Operands& ops,
                                       uint32_t run, uint32_t pixel) {
  const uint32_t runs = g.C / 16, ohw = g.OH * g.OW, c0 = run * 16, n = pixel / ohw, p = pixel % ohw;
  Run16 out;
  if constexpr (kEpi == kEpiGeneral) {
#pragma unroll
    for (int k = 0; k < 16; ++k) out.b[k] = dw_chain_int8(chain, acc[k], n, c0 + k, p, ops);
  } else {
#pragma unroll
    for (int k = 0; k < 16; ++k) {
      const uint32_t at = k * runs + run;
      const int4 q = __ldg(windows.quads + at);
      const num::RequantWindow w{q.x, q.y, q.z, uint32_t(q.w), __ldg(windows.bias_mult + at),
                                 kEpi == kEpiWindowNonNegative ? 0 : __ldg(windows.half + at)};
      out.b[k] = num::sat8(kEpi == kEpiWindowNonNegative ? num::requant_window_nonnegative(acc[k], w)
                                                         : num::requant_window_value(acc[k], w));
    }
  }
  if constexpr (kOutNhwc) {
    *reinterpret_cast<uint4*>(y + pixel * g.C + c0) = out.q;
  } else {
#pragma unroll
    for (int k = 0; k < 16; ++k) y[(n * g.C + c0 + k) * ohw + p] = out.b[k];
  }
}

// One thread per 16 channels (c0..c0+15) of one output pixel. weights: int8 [R * S][C] (a tap's channels
// adjacent). Products are at most 2^14 and there are fewer than 2^17 taps: the int32 sum is exact in any
// order, so it equals the direct kernel's (and the CPU backend's) accumulator. kTaps: 3 for the 3 x 3
// kernels (unrolled: every tap's loads issue before the sums), 0 for any R x S.
template <bool kInNhwc, bool kOutNhwc, int kEpi, int kTaps>
__global__ void depthwise_s8_kernel(const int8_t* __restrict x, const int8_t* __restrict weights,
                                    int8_t* __restrict y, DwShape g, Windows windows,
                                    const __grid_constant__ DevChain chain, const __grid_constant__ Operands ops) {
  const uint32_t runs = g.C / 16, ohw = g.OH * g.OW, total = g.N * ohw * runs;  // below 2^31 (checked at load)
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    // Consecutive threads take consecutive channel runs of one pixel: channels-last loads coalesce.
    const uint32_t run = i % runs, pixel = i / runs, c0 = run * 16;
    const uint32_t n = pixel / ohw, p = pixel % ohw, oh = p / g.OW, ow = p % g.OW;
    const int32_t ih0 = int32_t(oh * g.sh) - int32_t(g.pt), iw0 = int32_t(ow * g.sw) - int32_t(g.pl);
    const uint4* wt = reinterpret_cast<const uint4*>(weights + c0);
    const uint32_t tap_stride = g.C / 16;  // uint4 per tap
    int32_t acc[16] = {};
    if constexpr (kTaps == 3) {
      uint4 v[9], w[9];
#pragma unroll
      for (int t = 0; t < 9; ++t) {
        v[t] = load_tap<kInNhwc>(x, g, n, c0, ih0 + int32_t((t / 3) * g.dh), iw0 + int32_t((t % 3) * g.dw));
        w[t] = __ldg(wt + t * tap_stride);
      }
#pragma unroll
      for (int t = 0; t < 9; ++t) mac16(acc, v[t], w[t]);
    } else {
      for (uint32_t r = 0; r < g.R; ++r) {
        const int32_t ih = ih0 + int32_t(r * g.dh);
        if (ih < 0 || ih >= int32_t(g.H)) continue;
        for (uint32_t s = 0; s < g.S; ++s) {
          const int32_t iw = iw0 + int32_t(s * g.dw);
          if (iw < 0 || iw >= int32_t(g.W)) continue;
          mac16(acc, load_tap<kInNhwc>(x, g, n, c0, ih, iw), __ldg(wt + (r * g.S + s) * tap_stride));
        }
      }
    }
    finish<kOutNhwc, kEpi>(acc, y, g, windows, chain, ops, run, pixel);
  }
}

// Few outputs with many taps (a global average pool lowered to a depthwise convolution: 2048 channels
// of one 7 x 7 window make 128 runs, one block of the kernel above, each thread 49 taps in a row): a
// warp per (pixel, run), its lanes taking every 32nd tap, the sums added across the warp (exact in int32
// in any order, so the same bytes).
template <bool kInNhwc, bool kOutNhwc, int kEpi>
__global__ void depthwise_s8_warp_kernel(const int8_t* __restrict x, const int8_t* __restrict weights,
                                         int8_t* __restrict y, DwShape g, Windows windows,
                                         const __grid_constant__ DevChain chain, const __grid_constant__ Operands ops) {
  const uint32_t runs = g.C / 16, ohw = g.OH * g.OW, total = g.N * ohw * runs, taps = g.R * g.S;
  const uint32_t lane = threadIdx.x % 32, warps = gridDim.x * blockDim.x / 32;
  for (uint32_t i = (blockIdx.x * blockDim.x + threadIdx.x) / 32; i < total; i += warps) {
    const uint32_t run = i % runs, pixel = i / runs, c0 = run * 16;
    const uint32_t n = pixel / ohw, p = pixel % ohw, oh = p / g.OW, ow = p % g.OW;
    const int32_t ih0 = int32_t(oh * g.sh) - int32_t(g.pt), iw0 = int32_t(ow * g.sw) - int32_t(g.pl);
    const uint4* wt = reinterpret_cast<const uint4*>(weights + c0);
    int32_t acc[16] = {};
    for (uint32_t t = lane; t < taps; t += 32) {
      const uint32_t r = t / g.S, s = t % g.S;
      mac16(acc, load_tap<kInNhwc>(x, g, n, c0, ih0 + int32_t(r * g.dh), iw0 + int32_t(s * g.dw)),
            __ldg(wt + t * (g.C / 16)));
    }
#pragma unroll
    for (int k = 0; k < 16; ++k)
#pragma unroll
      for (int off = 16; off > 0; off /= 2) acc[k] += __shfl_xor_sync(0xffffffffu, acc[k], off);
    if (lane == 0) finish<kOutNhwc, kEpi>(acc, y, g, windows, chain, ops, run, pixel);
  }
}

class DepthwiseS8 final : public GpuOp {
 public:
  DepthwiseS8(const Model& m, const Op& op, const ConvParams& p, const OpContext& ctx)
      : chain_(m, op, p.post, &ctx.channels_last), in_nhwc_(ctx.channels_last[op.inputs[0]] != 0),
        out_nhwc_(ctx.channels_last[op.outputs[0]] != 0) {
    const Shape& x = m.tensors[op.inputs[0]].shape;
    const Shape& yv = m.tensors[op.outputs[0]].shape;
    const Constant& w = m.constants[p.weights];
    g_ = {x[0], x[1], x[2], x[3], yv[2], yv[3], w.dims[2], w.dims[3], p.stride_h, p.stride_w, p.dilation_h,
          p.dilation_w, p.pad_top, p.pad_left};
    // [C][1][R][S] -> [R * S][C].
    const int8_t* src = reinterpret_cast<const int8_t*>(w.data.data());
    const uint32_t taps = g_.R * g_.S;
    std::vector<int8_t> packed(size_t(taps) * g_.C);
    for (uint32_t c = 0; c < g_.C; ++c)
      for (uint32_t t = 0; t < taps; ++t) packed[size_t(t) * g_.C + c] = src[size_t(c) * taps + t];
    weights_ = upload(packed);
    // The windowed epilogue when every channel has a window ([k][run] arrays, see Windows); otherwise
    // the general chain.
    if (const auto windows = conv_windows(p.post, g_.C)) {
      const uint32_t runs = g_.C / 16;
      std::vector<int4> quads(g_.C);
      std::vector<long long> bias_mult(g_.C), half(g_.C);
      bool nonnegative = true;
      for (uint32_t c = 0; c < g_.C; ++c) {
        const num::RequantWindow& wnd = (*windows)[c];
        const size_t at = size_t(c % 16) * runs + c / 16;
        quads[at] = int4{wnd.lo, wnd.hi, wnd.mult, int32_t(wnd.shifts)};
        bias_mult[at] = wnd.bias_mult, half[at] = wnd.half;
        nonnegative = nonnegative && (wnd.shifts & num::RequantWindow::kNonNegative);
      }
      quads_ = upload(quads), bias_mult_ = upload(bias_mult), half_ = upload(half);
      epilogue_ = nonnegative ? kEpiWindowNonNegative : kEpiWindow;
    }
    taps3_ = g_.R == 3 && g_.S == 3;
    // Fewer (pixel, run) items than a few blocks' threads, each with many taps: a warp per item.
    const uint64_t items = uint64_t(g_.N) * g_.OH * g_.OW * (g_.C / 16);
    warp_per_output_ = taps >= kWarpTaps && items <= kWarpItemsMax;
  }

  void enqueue(const GpuOpIo& io, const OpContext&, cudaStream_t stream) const override {
    const Operands ops = operands_of(io);
    const int8_t* x = static_cast<const int8_t*>(io.inputs[0]);
    int8_t* y = static_cast<int8_t*>(io.output);
    const uint64_t items = uint64_t(g_.N) * g_.OH * g_.OW * (g_.C / 16);
    const Windows windows{quads_.as<int4>(), bias_mult_.as<long long>(), half_.as<long long>()};
    auto launch = [&](auto in_tag, auto out_tag, auto epi_tag, auto taps_tag) {
      depthwise_s8_kernel<decltype(in_tag)::value, decltype(out_tag)::value, decltype(epi_tag)::value,
                          decltype(taps_tag)::value>
          <<<blocks_for(items), kThreads, 0, stream>>>(x, weights_.as<int8_t>(), y, g_, windows, chain_.chain(), ops);
    };
    auto go = [&](auto in_tag, auto out_tag, auto epi_tag) {
      if (warp_per_output_) {
        depthwise_s8_warp_kernel<decltype(in_tag)::value, decltype(out_tag)::value, decltype(epi_tag)::value>
            <<<blocks_for(items * 32), kThreads, 0, stream>>>(x, weights_.as<int8_t>(), y, g_, windows, chain_.chain(),
                                                             ops);
        return;
      }
      taps3_ ? launch(in_tag, out_tag, epi_tag, std::integral_constant<int, 3>{})
             : launch(in_tag, out_tag, epi_tag, std::integral_constant<int, 0>{});
    };
    auto with_epi = [&](auto in_tag, auto out_tag) {
      using std::integral_constant;
      switch (epilogue_) {
        case kEpiWindow: return go(in_tag, out_tag, integral_constant<int, kEpiWindow>{});
        case kEpiWindowNonNegative: return go(in_tag, out_tag, integral_constant<int, kEpiWindowNonNegative>{});
        default: return go(in_tag, out_tag, integral_constant<int, kEpiGeneral>{});
      }
    };
    auto with_out = [&](auto in_tag) {
      out_nhwc_ ? with_epi(in_tag, std::true_type{}) : with_epi(in_tag, std::false_type{});
    };
    in_nhwc_ ? with_out(std::true_type{}) : with_out(std::false_type{});
    check_launch("depthwise_s8_kernel");
  }

 private:
  ChainHolder chain_;
  bool in_nhwc_, out_nhwc_;
  DwShape g_{};
  int epilogue_ = kEpiGeneral;
  bool taps3_ = false;  // a 3 x 3 kernel: the unrolled tap loop
  bool warp_per_output_ = false;  // depthwise_s8_warp_kernel
  static constexpr uint32_t kWarpTaps = 16;        // taps from which a warp per output pays
  static constexpr uint32_t kWarpItemsMax = 4096;  // (pixel, run) items up to which it does
  DeviceBuffer weights_, quads_, bias_mult_, half_;  // the last three: the windowed epilogues' Windows
};

}  // namespace

bool depthwise_s8_supports(const Model& m, const Op& op, const ConvParams& p) {
  const Tensor& x = m.tensors[op.inputs[0]];
  const Tensor& y = m.tensors[op.outputs[0]];
  const Constant& w = m.constants[p.weights];
  const uint64_t limit = uint64_t(1) << 31;
  return x.dtype == DataType::kInt8 && y.dtype == DataType::kInt8 && p.groups == x.shape[1] &&
         y.shape[1] == x.shape[1] && x.shape[1] % 16 == 0 && uint64_t(w.dims[2]) * w.dims[3] < kMaxExactTerms &&
         element_count(x.shape) < limit && element_count(y.shape) < limit;
}

std::unique_ptr<GpuOp> make_depthwise_s8(const Model& m, const Op& op, const ConvParams& p, const OpContext& ctx) {
  return std::make_unique<DepthwiseS8>(m, op, p, ctx);
}

}  // namespace softdla::gpu
