// Convolution on the GPU. Dense INT8 and FP16 convolutions are implicit GEMMs on channels-last
// activations (conv_igemm.h, conv_igemm_f16.h; INT8 reductions short enough for exact int32 sums); FP16
// depthwise ones with channels a multiple of 8 and INT8 ones with channels a multiple of 16 are
// channels-last direct kernels (conv_depthwise_f16.h, conv_depthwise_s8.h). The others: dense and
// grouped convolutions are im2col + a cuBLASLt matrix product on the tensor cores (INT8 x INT8 -> INT32,
// exact; FP16 x FP16 -> FP32), followed by one epilogue kernel that runs the SDP chain and writes the
// output type. The remaining depthwise convolutions (one input channel per group), INT8 reductions of
// 2^17 terms or more (int32 sums of products up to 2^14 could overflow) and deconvolutions are direct
// kernels with the SDP chain fused.
#include <stdexcept>
#include <string>

#include "conv_depthwise_f16.h"
#include "conv_depthwise_s8.h"
#include "conv_igemm.h"
#include "conv_igemm_f16.h"
#include "sdp_device.cuh"

namespace softdla::gpu {
namespace {

constexpr uint32_t kKAlign = 16;  // reduction length padding: 16-byte rows for the tensor cores

uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

struct Geometry {
  uint32_t N, C, H, W, K, R, S, OH, OW, groups, Cg, Kg;
  uint32_t sh, sw, dh, dw, pt, pl;
  uint32_t kdim() const { return Cg * R * S; }
};

// Element types: storage in memory, and the type the tensor cores read.
template <class T> struct GemmType;
template <> struct GemmType<int8_t> { using In = int8_t; using Acc = int32_t; };
template <> struct GemmType<uint16_t> { using In = __half; using Acc = float; };
template <> struct GemmType<float> { using In = float; using Acc = float; };

// Where reduction index kk = (c, r, s) reads, relative to the receptive field's top-left input pixel:
// the channel-plane offset and the tap's row/column displacement. Built once per convolution.
struct Tap {
  int32_t plane_offset;  // (group channel c) * H * W, or -1 for kk >= kdim (zero padding)
  int16_t dy, dx;        // r * dilation_h, s * dilation_w
};

// col[n][pixel][kk] = input sample of reduction index kk for output pixel (zero outside the image and
// for the padding kk >= kdim). Each thread writes 4 consecutive kk as one 32-bit word (int8) or two
// (fp16); blockIdx.y is the image. Index arithmetic is 32-bit: one image's im2col is below 2^31 bytes.
template <class T>
__global__ void im2col_kernel(const T* __restrict x, T* __restrict col, Geometry g, uint32_t group, uint32_t kpad,
                              const Tap* __restrict taps) {
  const uint32_t ohw = g.OH * g.OW, quads = kpad / 4, total = ohw * quads;
  const uint32_t n = blockIdx.y;
  const T* image = x + (uint64_t(n) * g.C + uint64_t(group) * g.Cg) * g.H * g.W;
  T* out = col + uint64_t(n) * ohw * kpad;
  for (uint32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const uint32_t q = i % quads, p = i / quads;
    const int32_t y0 = int32_t(p / g.OW) * int32_t(g.sh) - int32_t(g.pt);
    const int32_t x0 = int32_t(p % g.OW) * int32_t(g.sw) - int32_t(g.pl);
    T v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const Tap t = taps[q * 4 + j];
      const int32_t iy = y0 + t.dy, ix = x0 + t.dx;
      v[j] = (t.plane_offset >= 0 && iy >= 0 && iy < int32_t(g.H) && ix >= 0 && ix < int32_t(g.W))
                 ? image[t.plane_offset + iy * int32_t(g.W) + ix] : T(0);
    }
    T* dst = out + uint64_t(p) * kpad + q * 4;
    if constexpr (sizeof(T) == 1) {
      *reinterpret_cast<uint32_t*>(dst) = uint32_t(uint8_t(v[0])) | uint32_t(uint8_t(v[1])) << 8 |
                                          uint32_t(uint8_t(v[2])) << 16 | uint32_t(uint8_t(v[3])) << 24;
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) dst[j] = v[j];
    }
  }
}

// acc is [N][K][ldd] (pixels innermost); writes the NCHW output through the SDP chain. blockIdx.x is
// the (image, channel) plane, so the per-channel parameters are uniform across a block.
template <class T, class Acc>
__global__ void epilogue_kernel(const Acc* __restrict acc, T* __restrict y, Geometry g, uint64_t ldd,
                                const __grid_constant__ DevChain chain, const __grid_constant__ Operands ops) {
  const uint32_t ohw = g.OH * g.OW, nk = blockIdx.x, k = nk % g.K, n = nk / g.K;
  const Acc* src = acc + uint64_t(nk) * ldd;
  T* dst = y + uint64_t(nk) * ohw;
  for (uint32_t p = blockIdx.y * blockDim.x + threadIdx.x; p < ohw; p += gridDim.y * blockDim.x) {
    if constexpr (std::is_same_v<T, int8_t>) dst[p] = chain_int8(chain, src[p], n, k, p, ops);
    else store_f(dst, p, chain_float(chain, src[p], n, k, p, ops));
  }
}

// Direct convolution, one output element per thread, the SDP chain fused: depthwise convolutions
// (Acc = int32 for INT8: at most 32 x 32 taps) and INT8 reductions too long for the tensor cores'
// int32 sums (Acc = int64, then saturated to int32 as the CPU backend does; docs/NUMERICS.md).
template <class T, class Acc>
__global__ void direct_conv_kernel(const T* __restrict x, const T* __restrict w, T* __restrict y, Geometry g,
                                   const __grid_constant__ DevChain chain, const __grid_constant__ Operands ops) {
  const uint64_t ohw = uint64_t(g.OH) * g.OW, total = uint64_t(g.N) * g.K * ohw;
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < total; i += uint64_t(gridDim.x) * blockDim.x) {
    const uint32_t p = uint32_t(i % ohw), oh = p / g.OW, ow = p % g.OW;
    const uint64_t nk = i / ohw;
    const uint32_t k = uint32_t(nk % g.K), n = uint32_t(nk / g.K), grp = k / g.Kg;
    Acc acc = 0;
    for (uint32_t c = 0; c < g.Cg; ++c) {
      const T* plane = x + (uint64_t(n) * g.C + uint64_t(grp) * g.Cg + c) * g.H * g.W;
      const T* wk = w + (uint64_t(k) * g.Cg + c) * g.R * g.S;
      for (uint32_t r = 0; r < g.R; ++r) {
        const int64_t ih = int64_t(oh) * g.sh - g.pt + int64_t(r) * g.dh;
        if (ih < 0 || ih >= g.H) continue;
        for (uint32_t s = 0; s < g.S; ++s) {
          const int64_t iw = int64_t(ow) * g.sw - g.pl + int64_t(s) * g.dw;
          if (iw >= 0 && iw < g.W)
            acc += Acc(acc_operand(wk, r * g.S + s)) * Acc(acc_operand(plane, uint64_t(ih * g.W + iw)));
        }
      }
    }
    if constexpr (std::is_same_v<T, int8_t>) y[i] = chain_int8(chain, num::sat32(acc), n, k, p, ops);
    else store_f(y, i, chain_float(chain, acc, n, k, p, ops));
  }
}

cudaDataType_t lt_type(DataType t, bool accumulator) {
  if (t == DataType::kInt8) return accumulator ? CUDA_R_32I : CUDA_R_8I;
  if (t == DataType::kFloat16) return accumulator ? CUDA_R_32F : CUDA_R_16F;
  return CUDA_R_32F;
}

class ConvOp final : public GpuOp {
 public:
  ConvOp(const Model& m, const Op& op, const ConvParams& p, const OpContext& ctx)
      : chain_(m, op, p.post, &ctx.channels_last), dtype_(m.tensors[op.outputs[0]].dtype), name_(op.name) {
    const Shape& x = m.tensors[op.inputs[0]].shape;
    const Shape& y = m.tensors[op.outputs[0]].shape;
    const Constant& w = m.constants[p.weights];
    g_ = {x[0], x[1], x[2], x[3], y[1], w.dims[2], w.dims[3], y[2], y[3], p.groups, x[1] / p.groups,
          y[1] / p.groups, p.stride_h, p.stride_w, p.dilation_h, p.dilation_w, p.pad_top, p.pad_left};
    direct_ = g_.Cg == 1 || (dtype_ == DataType::kInt8 && g_.kdim() >= kMaxExactTerms);
    const size_t elem = element_size(dtype_);
    if (direct_) {
      weights_ = DeviceBuffer(w.data.data(), w.data.size());
      return;
    }
    // Weights [K][kdim] -> [K][kpad], zero padded.
    kpad_ = uint32_t(round_up(g_.kdim(), kKAlign));
    std::vector<uint8_t> padded(size_t(g_.K) * kpad_ * elem, 0);
    for (uint32_t k = 0; k < g_.K; ++k)
      std::memcpy(padded.data() + size_t(k) * kpad_ * elem, w.data.data() + size_t(k) * g_.kdim() * elem,
                  size_t(g_.kdim()) * elem);
    weights_ = upload(padded);
    std::vector<Tap> taps(kpad_, Tap{-1, 0, 0});
    for (uint32_t kk = 0; kk < g_.kdim(); ++kk) {
      const uint32_t c = kk / (g_.R * g_.S), r = (kk / g_.S) % g_.R, s = kk % g_.S;
      taps[kk] = {int32_t(c * g_.H * g_.W), int16_t(r * g_.dh), int16_t(s * g_.dw)};
    }
    taps_ = upload(taps);
    ohw_ = uint64_t(g_.OH) * g_.OW;
    ldd_ = round_up(ohw_, 4);
    col_bytes_ = round_up(uint64_t(g_.N) * ohw_ * kpad_ * elem, 256);
    acc_bytes_ = uint64_t(g_.N) * g_.K * ldd_ * 4;
    plan_gemm(ctx);
  }
  ~ConvOp() override {
    if (matmul_) cublasLtMatmulDescDestroy(matmul_);
    for (auto* l : {a_, b_, d_})
      if (l) cublasLtMatrixLayoutDestroy(l);
  }

  size_t scratch_bytes() const override { return direct_ ? 0 : col_bytes_ + acc_bytes_; }

  void enqueue(const GpuOpIo& io, const OpContext& ctx, cudaStream_t stream) const override {
    const Operands ops = operands_of(io);
    const uint64_t out_count = uint64_t(g_.N) * g_.K * g_.OH * g_.OW;
    if (direct_) {
      with_storage(dtype_, [&](auto* tag) {
        using T = std::remove_pointer_t<decltype(tag)>;
        const T* x = static_cast<const T*>(io.inputs[0]);
        const T* w = weights_.as<T>();
        T* y = static_cast<T*>(io.output);
        const unsigned blocks = blocks_for(out_count);
        if constexpr (!std::is_same_v<T, int8_t>)
          direct_conv_kernel<T, float><<<blocks, kThreads, 0, stream>>>(x, w, y, g_, chain_.chain(), ops);
        else if (g_.kdim() >= kMaxExactTerms)
          direct_conv_kernel<T, int64_t><<<blocks, kThreads, 0, stream>>>(x, w, y, g_, chain_.chain(), ops);
        else
          direct_conv_kernel<T, int32_t><<<blocks, kThreads, 0, stream>>>(x, w, y, g_, chain_.chain(), ops);
      });
      return check_launch("direct_conv_kernel");
    }
    uint8_t* col = static_cast<uint8_t*>(io.scratch);
    void* acc = col + col_bytes_;
    const size_t elem = element_size(dtype_);
    for (uint32_t grp = 0; grp < g_.groups; ++grp) {
      with_storage(dtype_, [&](auto* tag) {
        using T = std::remove_pointer_t<decltype(tag)>;
        const dim3 grid(blocks_for(ohw_ * kpad_ / 4), g_.N);
        im2col_kernel<T><<<grid, kThreads, 0, stream>>>(static_cast<const T*>(io.inputs[0]), reinterpret_cast<T*>(col),
                                                         g_, grp, kpad_, taps_.as<Tap>());
      });
      check_launch("im2col_kernel");
      const int32_t one_i = 1, zero_i = 0;
      const float one_f = 1.f, zero_f = 0.f;
      const bool integer = dtype_ == DataType::kInt8;
      const void* alpha = integer ? static_cast<const void*>(&one_i) : &one_f;
      const void* beta = integer ? static_cast<const void*>(&zero_i) : &zero_f;
      const uint8_t* w = weights_.as<uint8_t>() + size_t(grp) * g_.Kg * kpad_ * elem;
      uint8_t* d = static_cast<uint8_t*>(acc) + size_t(grp) * g_.Kg * ldd_ * 4;
      SOFTDLA_LT(cublasLtMatmul(ctx.lt, matmul_, alpha, col, a_, w, b_, beta, d, d_, d, d_, &algo_, ctx.workspace,
                                ctx.workspace_bytes, stream));
    }
    with_storage(dtype_, [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      using Acc = typename GemmType<T>::Acc;
      const dim3 grid(g_.N * g_.K, std::min(blocks_for(ohw_), 65535u));
      epilogue_kernel<T, Acc><<<grid, kThreads, 0, stream>>>(
          static_cast<const Acc*>(acc), static_cast<T*>(io.output), g_, ldd_, chain_.chain(), ops);
    });
    check_launch("epilogue_kernel");
  }

 private:
  // D[ldd x Kg] (per image) = col^T[pixels x kpad] * W^T: both operands K-major ("TN"), which the INT8
  // tensor-core kernels require; the result is already NCHW (pixels innermost).
  void plan_gemm(const OpContext& ctx) {
    const bool integer = dtype_ == DataType::kInt8;
    const cublasComputeType_t compute = integer ? CUBLAS_COMPUTE_32I : CUBLAS_COMPUTE_32F;
    SOFTDLA_LT(cublasLtMatmulDescCreate(&matmul_, compute, integer ? CUDA_R_32I : CUDA_R_32F));
    const cublasOperation_t t = CUBLAS_OP_T, n = CUBLAS_OP_N;
    SOFTDLA_LT(cublasLtMatmulDescSetAttribute(matmul_, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t));
    SOFTDLA_LT(cublasLtMatmulDescSetAttribute(matmul_, CUBLASLT_MATMUL_DESC_TRANSB, &n, sizeof n));
    const cudaDataType_t in = lt_type(dtype_, false), out = lt_type(dtype_, true);
    SOFTDLA_LT(cublasLtMatrixLayoutCreate(&a_, in, kpad_, ohw_, kpad_));
    SOFTDLA_LT(cublasLtMatrixLayoutCreate(&b_, in, kpad_, g_.Kg, kpad_));
    SOFTDLA_LT(cublasLtMatrixLayoutCreate(&d_, out, ohw_, g_.Kg, ldd_));
    const int32_t batch = int32_t(g_.N);
    const int64_t stride_a = int64_t(ohw_) * kpad_, stride_b = 0, stride_d = int64_t(g_.K) * ldd_;
    for (auto [layout, stride] : {std::pair{a_, stride_a}, {b_, stride_b}, {d_, stride_d}}) {
      SOFTDLA_LT(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch));
      SOFTDLA_LT(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                                  sizeof stride));
    }
    cublasLtMatmulPreference_t pref = nullptr;
    SOFTDLA_LT(cublasLtMatmulPreferenceCreate(&pref));
    const uint64_t ws = ctx.workspace_bytes;
    SOFTDLA_LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(ctx.lt, matmul_, a_, b_, d_, d_, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (st != CUBLAS_STATUS_SUCCESS || found == 0)
      throw std::runtime_error("op '" + name_ + "': cuBLASLt has no kernel for this convolution (" +
                               std::to_string(ohw_) + " x " + std::to_string(g_.Kg) + " x " + std::to_string(kpad_) + ")");
    algo_ = result.algo;
  }

  ChainHolder chain_;
  DataType dtype_;
  std::string name_;
  Geometry g_{};
  bool direct_ = false;  // depthwise, or an INT8 reduction too long for int32 sums
  uint32_t kpad_ = 0;
  uint64_t ohw_ = 0, ldd_ = 0, col_bytes_ = 0, acc_bytes_ = 0;
  DeviceBuffer weights_, taps_;
  cublasLtMatmulDesc_t matmul_ = nullptr;
  cublasLtMatrixLayout_t a_ = nullptr, b_ = nullptr, d_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
};

// out(n,k,oh,ow) = sum over c and the taps (r,s) with oh = ih*sh + r, ow = iw*sw + s.
template <class T>
__global__ void deconv_kernel(const T* __restrict x, const T* __restrict w, T* __restrict y, Shape in, Shape out,
                              uint32_t R, uint32_t S, uint32_t sh, uint32_t sw,
                              const __grid_constant__ DevChain chain, const __grid_constant__ Operands ops) {
  const uint64_t total = element_count(out);
  const uint64_t ihw = uint64_t(in[2]) * in[3];
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < total; i += uint64_t(gridDim.x) * blockDim.x) {
    const Nchw o = unflatten(i, out);
    using Acc = std::conditional_t<std::is_same_v<T, int8_t>, int64_t, float>;
    Acc acc = 0;
    for (uint32_t r = 0; r < R; ++r) {
      if (o.h < r || (o.h - r) % sh) continue;
      const uint32_t ih = (o.h - r) / sh;
      if (ih >= in[2]) continue;
      for (uint32_t s = 0; s < S; ++s) {
        if (o.w < s || (o.w - s) % sw) continue;
        const uint32_t iw = (o.w - s) / sw;
        if (iw >= in[3]) continue;
        for (uint32_t c = 0; c < in[1]; ++c) {
          const uint64_t xi = (uint64_t(o.n) * in[1] + c) * ihw + uint64_t(ih) * in[3] + iw;
          const uint64_t wi = ((uint64_t(c) * out[1] + o.c) * R + r) * S + s;
          acc += Acc(acc_operand(x, xi)) * Acc(acc_operand(w, wi));
        }
      }
    }
    const uint32_t hw = o.h * out[3] + o.w;
    if constexpr (std::is_same_v<T, int8_t>) y[i] = chain_int8(chain, num::sat32(acc), o.n, o.c, hw, ops);
    else store_f(y, i, chain_float(chain, acc, o.n, o.c, hw, ops));
  }
}

class DeconvOp final : public GpuOp {
 public:
  DeconvOp(const Model& m, const Op& op, const DeconvParams& p, const OpContext& ctx)
      : chain_(m, op, p.post, &ctx.channels_last), dtype_(m.tensors[op.outputs[0]].dtype), in_(m.tensors[op.inputs[0]].shape),
        out_(m.tensors[op.outputs[0]].shape), sh_(p.stride_h), sw_(p.stride_w) {
    const Constant& w = m.constants[p.weights];
    R_ = w.dims[2], S_ = w.dims[3];
    weights_ = DeviceBuffer(w.data.data(), w.data.size());
  }
  void enqueue(const GpuOpIo& io, const OpContext&, cudaStream_t stream) const override {
    const Operands ops = operands_of(io);
    auto launch = [&](auto* tag) {
      using T = std::remove_pointer_t<decltype(tag)>;
      deconv_kernel<T><<<blocks_for(element_count(out_)), kThreads, 0, stream>>>(
          static_cast<const T*>(io.inputs[0]), weights_.as<T>(), static_cast<T*>(io.output), in_, out_, R_, S_, sh_,
          sw_, chain_.chain(), ops);
    };
    with_storage(dtype_, launch);
    check_launch("deconv_kernel");
  }

 private:
  ChainHolder chain_;
  DataType dtype_;
  Shape in_, out_;
  uint32_t sh_, sw_, R_ = 1, S_ = 1;
  DeviceBuffer weights_;
};

}  // namespace

std::unique_ptr<GpuOp> make_gpu_conv(const Model& m, const Op& op, const ConvParams& p, const OpContext& ctx) {
  if (igemm_supports(m, op, p)) return std::make_unique<IgemmConv>(m, op, p, ctx);
  if (igemm_f16_supports(m, op, p)) return std::make_unique<IgemmConvF16>(m, op, p, ctx);
  if (depthwise_f16_supports(m, op, p)) return make_depthwise_f16(m, op, p, ctx);
  if (depthwise_s8_supports(m, op, p)) return make_depthwise_s8(m, op, p, ctx);
  return std::make_unique<ConvOp>(m, op, p, ctx);
}
std::unique_ptr<GpuOp> make_gpu_deconv(const Model& m, const Op& op, const DeconvParams& p, const OpContext& ctx) {
  return std::make_unique<DeconvOp>(m, op, p, ctx);
}

}  // namespace softdla::gpu
