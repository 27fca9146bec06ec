// INT8 convolution as one implicit-GEMM kernel on the tensor cores (mma.sync m16n8k32, s8 x s8 -> s32;
// on Hopper wgmma m64n64k32 for the 128 x 128 and 256 x 64 tiles), reading channels-last
// activations directly (no im2col buffer) and running the SDP chain in the epilogue on the int32
// accumulators, from the mma fragments or parked in shared memory (no int32 round trip through DRAM).
// Optionally it also runs the standalone SDP op that follows the convolution (the residual add of
// ResNet-style blocks) on the int8 result before it is stored.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "requant_window.h"
#include "sdp_device.cuh"

namespace softdla::gpu {

struct IgemmGeometry;  // igemm_core.cuh
namespace igemm {
struct TmaMaps;  // igemm_core.cuh
}

// A fused residual add on one shared scale in 32-bit arithmetic (num::SharedScaleSum, int8_tables.h):
// out = clamp(((x + e) * mult + add) >> shift, lo, hi), checked there against the exact
// form for every pair of int8 operands.
struct SharedAdd {
  int32_t mult = 0, add = 0;
  uint32_t shift = 0;
  int32_t lo = 0, hi = 0;
};

// Convolutions this kernel runs exactly: INT8, dense (one group), a reduction short enough that int32
// sums cannot overflow (C*R*S < 2^17, products are at most 2^14), and fewer than 2^31 output pixels and
// padded input bytes (32-bit offsets). The others take the im2col + cuBLASLt or direct kernels.
bool igemm_supports(const Model& m, const Op& op, const ConvParams& p);

class IgemmConv final : public GpuOp {
 public:
  IgemmConv(const Model& m, const Op& op, const ConvParams& p, const OpContext& ctx);
  ~IgemmConv() override;
  size_t scratch_bytes() const override { return convert_bytes_; }
  bool fuse_next(const Model& m, const Op& next, size_t input, const OpContext& ctx) override;
  void enqueue(const GpuOpIo& io, const OpContext& ctx, cudaStream_t stream) const override;

 private:
  std::unique_ptr<IgemmGeometry> g_;
  ChainHolder chain_;
  std::optional<ChainHolder> fused_;
  bool fused_swapped_ = false;  // the convolution computes the fused op's second input, not its first
  std::optional<num::ResidualWindow> residual_;  // the fused op in the windowed epilogue's form
  std::optional<SharedAdd> shared_add_;          // and in the shared-scale form, where it has one
  bool fast_ = false;        // the chain is bias, then at most one clamp (ReLU/Clip), then requantization
  bool input_nhwc_ = false;  // else converted into scratch first
  bool output_nhwc_ = false;
  uint32_t channels_ = 0;     // input channels before padding
  uint32_t in_h_ = 0, in_w_ = 0;  // input image size (the geometry's is the converted one)
  bool space_to_depth_ = false;   // small-channel stride-2 input taken as 2 x 2 blocks (conv_igemm.cu)
  uint64_t convert_bytes_ = 0;
  DeviceBuffer weights_, bias_, mult_, shift_;
  DeviceBuffer windows_;  // num::RequantWindow per channel when every channel has one (fast chain)
  int window_flags_ = 0;  // kConvNonNegative when every window has kNonNegative
  bool conv_in_range_ = false;  // every channel's rescaled value lies in int8 (windowed epilogue)
  int32_t lo_ = INT32_MIN, hi_ = INT32_MAX;
  int tile_ = 0;  // 0: 128 pixels x 128 channels, 1: 256 x 64, 2: 64 x 128 and 3: 128 x 64 (narrow warps)
  int splits_ = 1;  // blocks (a cluster) sharing one output tile, each with a slice of the reduction
  bool wgmma_ = false;  // 128 x 128 (128-byte k-tiles) and 256 x 64 tiles take wgmma (sm_90a on CC 9.0)
  uint32_t stream_columns_ = 0;  // blocks a channel column of igemm_stream_kernel (0: the tiled kernels)
  std::unique_ptr<igemm::TmaMaps> maps_;  // the weights' tensor map where the wgmma tiles take TMA stages
};

}  // namespace softdla::gpu
