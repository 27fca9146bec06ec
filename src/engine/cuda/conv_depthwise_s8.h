// INT8 depthwise convolution (one input and one output channel per group) on channels-last tensors:
// each thread computes 16 adjacent channels of one output pixel from 16-byte loads of each tap's input
// and weights, sums exactly in int32, and runs the SDP chain in the epilogue. It keeps the INT8 chains
// of MobileNet-style networks channels-last between the implicit-GEMM 1 x 1 convolutions
// (channels_last.h); NCHW inputs or outputs (graph inputs and outputs) are read and written byte by byte.
#pragma once
#include <memory>

#include "gpu_ops.h"

namespace softdla::gpu {

// INT8 in and out, groups == input channels == output channels, channels a multiple of 16 (whole
// 16-byte runs, the channels-last rule), int32 sums exact (taps < 2^17, products at most 2^14), and
// tensors of fewer than 2^31 elements (32-bit indices). Other depthwise convolutions keep the NCHW
// direct kernel of conv.cu.
bool depthwise_s8_supports(const Model& m, const Op& op, const ConvParams& p);

std::unique_ptr<GpuOp> make_depthwise_s8(const Model& m, const Op& op, const ConvParams& p, const OpContext& ctx);

}  // namespace softdla::gpu
