// Which INT8 and FP16 intermediates the CUDA backend keeps channels-last (NHWC: the C values of one
// pixel adjacent) instead of the model's NCHW. The implicit-GEMM convolutions read their reduction
// (taps x channels) as 16-byte runs of channels, and the depthwise kernels (conv_depthwise_f16.h,
// conv_depthwise_s8.h) one pixel's channels as 16-byte runs, so ResNet-style chains of convolutions and
// residual adds and MobileNet-style chains with depthwise convolutions stay NHWC end to end; every
// other op, and every graph input and output, sees NCHW as before.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "model.h"

namespace softdla::gpu {

// One entry per tensor: 1 when stored NHWC. Only INT8 tensors with C % 16 == 0 and FP16 tensors with
// C % 8 == 0 (same byte count as NCHW, so the memory plan holds), produced and consumed only by ops
// with an NHWC kernel, and where a standalone SDP op's main input and output agree.
std::vector<uint8_t> plan_channels_last(const Model& m);

// x: [N][C][HW] int8 -> y: [N][HW][Cp] with channels C..Cp-1 zero.
void enqueue_to_channels_last(const int8_t* x, int8_t* y, uint32_t N, uint32_t C, uint32_t HW, uint32_t Cp,
                              cudaStream_t stream);

}  // namespace softdla::gpu
