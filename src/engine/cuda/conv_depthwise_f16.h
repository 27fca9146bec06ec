// FP16 depthwise convolution (one input and one output channel per group) on channels-last tensors:
// each thread computes 8 adjacent channels of one output pixel, reading each tap as one 16-byte load,
// with the SDP chain fused. It keeps the FP16 chains of MobileNet-style networks channels-last between
// the implicit-GEMM 1 x 1 convolutions (channels_last.h); NCHW inputs or outputs are read and written
// element by element.
#pragma once
#include <memory>

#include "gpu_ops.h"

namespace softdla::gpu {

// FP16, groups == input channels == output channels, channels a multiple of 8, and tensors of fewer
// than 2^31 elements (32-bit indices).
bool depthwise_f16_supports(const Model& m, const Op& op, const ConvParams& p);

std::unique_ptr<GpuOp> make_depthwise_f16(const Model& m, const Op& op, const ConvParams& p, const OpContext& ctx);

}  // namespace softdla::gpu
