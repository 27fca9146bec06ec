// FP16 convolution as one implicit-GEMM kernel on the tensor cores (mma.sync m16n8k16, f16 x f16 ->
// f32), the sibling of the INT8 one (conv_igemm.h) on the same loaders, pipeline and split-K
// (igemm_core.cuh): channels-last fp16 activations read directly, the fp32 accumulators parked in shared
// memory, the float SDP chain in the epilogue (docs/NUMERICS.md §2: fp32 on the fp32 accumulator, one
// saturating rounding to fp16), and optionally the standalone SDP op that follows (the residual add)
// on the fp16 result before it is stored, as that op would compute it.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>

#include "half_device.cuh"
#include "sdp_device.cuh"

namespace softdla::gpu {

struct IgemmGeometry;  // igemm_core.cuh

// What the FP16 kernel's epilogue needs besides the chains (plain data, passed by value).
struct F16Epilogue {
  const float* bias = nullptr;  // the short form's Bias step per output channel (null: no Bias step)
  FloatActivation act;          // the short form's activation
  uint8_t output_nhwc = 0;
  uint8_t fused = 0;            // 0 none, 1 the fused op's chain (step interpreter), 2 the residual form
  FloatActivation residual_act;  // the residual form: EltAdd of `operand`, then this
  const uint16_t* operand = nullptr;
};

// FP16 convolutions this kernel runs: dense (one group), fp16 output, fewer than 2^31 output pixels and
// padded input bytes (32-bit offsets).
bool igemm_f16_supports(const Model& m, const Op& op, const ConvParams& p);

class IgemmConvF16 final : public GpuOp {
 public:
  IgemmConvF16(const Model& m, const Op& op, const ConvParams& p, const OpContext& ctx);
  ~IgemmConvF16() override;
  size_t scratch_bytes() const override { return convert_bytes_; }
  bool fuse_next(const Model& m, const Op& next, size_t input, const OpContext& ctx) override;
  void enqueue(const GpuOpIo& io, const OpContext& ctx, cudaStream_t stream) const override;

 private:
  std::unique_ptr<IgemmGeometry> g_;
  ChainHolder chain_;
  std::optional<ChainHolder> fused_;
  std::optional<FloatActivation> residual_;  // the fused op in the residual form
  bool fused_swapped_ = false;  // the convolution computes the fused op's second input, not its first
  bool fast_ = false;           // the chain is [Bias] [ReLU | Clip]
  bool has_bias_ = false;
  FloatActivation act_;
  bool input_nhwc_ = false;  // else converted into scratch first
  bool output_nhwc_ = false;
  uint32_t channels_ = 0;          // input channels before padding
  uint32_t in_h_ = 0, in_w_ = 0;   // input image size (the geometry's is the converted one)
  uint32_t cp_ = 0;                // channels per converted pixel (4, 16 space-to-depth, or a multiple of 8)
  bool space_to_depth_ = false;    // small-channel stride-2 input taken as 2 x 2 blocks (conv_igemm_f16.cu)
  uint64_t convert_bytes_ = 0;
  DeviceBuffer weights_, bias_;
  int tile_ = 0;    // 0: 128 pixels x 128 channels, 1: 256 x 64
  int splits_ = 1;  // blocks (a cluster) sharing one output tile
};

}  // namespace softdla::gpu
