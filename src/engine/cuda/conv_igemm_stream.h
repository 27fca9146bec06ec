// The streaming INT8 1 x 1 convolution (conv_igemm_stream.cu): for pointwise convolutions whose whole
// reduction is one k-tile of 64 or 128 bytes (ResNet's expand and projection convolutions over 64 or
// 128 channels), persistent blocks keep their 128 channels' weights and requantization windows in
// shared memory and stream 128-pixel tiles through them, fetching the next tile's pixels and residual
// operand while the current tile's epilogue runs. The implicit-GEMM kernel instead runs load, product,
// epilogue and store back to back in each block, and these launches are bound by that latency.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "conv_igemm.h"  // SharedAdd
#include "requant_window.h"

namespace softdla::gpu {

struct IgemmGeometry;  // igemm_core.cuh

// What the streaming kernel needs beyond the geometry; the windowed epilogue's inputs as conv_igemm.cu
// has them (flags: igemm_s8_epilogue.cuh's).
struct StreamEpilogue {
  const num::RequantWindow* windows = nullptr;  // padded to whole 128-channel tiles
  int flags = 0;
  num::ResidualWindow residual{};
  SharedAdd shared{};
  const int8_t* operand = nullptr;  // the fused residual add's other input ([M][K], NHWC), or null
  int fused = 0;                    // 0 none, 1 the convolution computes the add's x, 2 its e
};

// Whether g can take the streaming kernel: pointwise, a reduction of 64 or 128 bytes, K a multiple of
// 16 and above 64 (128-channel tiles).
bool stream_supports(const IgemmGeometry& g);

// Blocks the kernel would run with (a multiple of the channel tiles, at most two an SM, at most
// `max_blocks` when that is positive), or 0 when the kernel does not pay: fewer tiles than blocks.
// SOFTDLA_CUDA_STREAM=off never takes it; =<n> takes it wherever supported, with at most n blocks
// (tests: several tiles a block); read once per process.
int stream_blocks(const IgemmGeometry& g);

void enqueue_stream(const int8_t* x, const int8_t* w, int8_t* y, const IgemmGeometry& g, const StreamEpilogue& e,
                    int blocks, cudaStream_t stream);

// The kernels' dynamic shared memory above 48 KB (set at load time, never while a stream is captured).
void allow_stream_shared_memory();

}  // namespace softdla::gpu
