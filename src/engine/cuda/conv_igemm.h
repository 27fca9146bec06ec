// INT8 convolution as one implicit-GEMM kernel on the tensor cores (mma.sync m16n8k32, s8 x s8 -> s32),
// reading channels-last activations directly (no im2col buffer) and running the SDP chain in the
// epilogue on the int32 accumulators, parked in shared memory (no int32 round trip through DRAM).
// Optionally it also runs the standalone SDP op that follows the convolution (the residual add of
// ResNet-style blocks) on the int8 result before it is stored.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "sdp_device.cuh"

namespace softdla::gpu {

// Convolutions this kernel runs exactly: INT8, dense (one group), a reduction short enough that int32
// sums cannot overflow (C*R*S < 2^17, products are at most 2^14), and fewer than 2^31 output pixels and
// padded input bytes (32-bit offsets). The others take the im2col + cuBLASLt or direct kernels.
bool igemm_supports(const Model& m, const Op& op, const ConvParams& p);

class IgemmConv final : public GpuOp {
 public:
  IgemmConv(const Model& m, const Op& op, const ConvParams& p, const OpContext& ctx);
  ~IgemmConv() override;
  size_t scratch_bytes() const override { return convert_bytes_; }
  bool fuse_next(const Model& m, const Op& next, const OpContext& ctx) override;
  void enqueue(const GpuOpIo& io, const OpContext& ctx, cudaStream_t stream) const override;

  struct Geometry;  // kernel geometry (conv_igemm.cu)

 private:
  std::unique_ptr<Geometry> g_;
  ChainHolder chain_;
  std::optional<ChainHolder> fused_;
  bool fast_ = false;        // the chain is bias, then at most one clamp (ReLU/Clip), then requantization
  bool input_nhwc_ = false;  // else converted into scratch first
  bool output_nhwc_ = false;
  uint32_t channels_ = 0;     // input channels before padding
  uint64_t convert_bytes_ = 0;
  DeviceBuffer weights_, bias_, mult_, shift_;
  int32_t lo_ = INT32_MIN, hi_ = INT32_MAX;
  int tile_ = 0;  // 0: 128 pixels x 128 channels, 1: 256 x 64
};

}  // namespace softdla::gpu
