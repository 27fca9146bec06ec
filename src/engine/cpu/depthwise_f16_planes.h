// FP16 depthwise convolution one channel plane at a time on AVX-512, sixteen output columns a vector, for
// planes wide enough to fill the vectors (stride 1, rows of 28 outputs or more), with its SDP chain of
// channel steps and the fp16 store fused into the same pass.
//
// Why beside the channel blocks (depthwise_f16_blocks.h): those put sixteen channels of one pixel in a
// vector, so the planar fp16 tensors are transposed on the way in and again on the way out, and a block
// reads sixteen planes at once (sixteen input and sixteen output streams). On a wide plane the columns
// fill the vectors by themselves: here each plane is read and written as one stream, its rows widened
// to fp32 once into a band that stays in L1, and nothing is transposed.
//
// Layout: a band row holds one input row widened to fp32 and split by column phase (stride 2: the even
// padded columns, then the odd ones), zeros in the padding columns, so each tap of sixteen outputs is one
// contiguous load whatever the stride. Up to eight output vectors are computed together (a long row's
// columns, or several short rows), each the FMA chain over the taps in (r, s) order from zero with the
// padding taps included as zeros, exactly as depthwise_f32_plane and the channel blocks do per element:
// the same bits on every path. Then the channel's steps, the rounding to fp16 (numerics.h), the store.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "aligned_vector.h"
#include "cpu_isa.h"
#include "depthwise_s8.h"
#include "sdp_chain.h"

namespace softdla::cpu {

class DepthwiseF16Planes {
 public:
  // Whether the CPU and the layer suit it: the AVX-512 path, a column stride of 1 or 2, and (unless
  // SOFTDLA_DW_F16 forces a kernel: planes, blocks or auto) rows of output wide enough that the channel
  // blocks would not be faster (measured; see the .cpp).
  static bool applies(Isa isa, const DepthwiseGeometry& g);
  // weights: [channels][R][S] fp32 (the fp16 weights widened); steps: [channels][n_steps]
  // (SdpChain::channel_steps, at most kMaxChannelSteps a channel).
  DepthwiseF16Planes(const DepthwiseGeometry& g, uint32_t channels, const float* weights,
                     std::vector<ChannelStep> steps);

  // One unit per band of a plane, for a pool of `threads`: image n, band b, channel k is unit
  // (n * bands + b) * channels + k. Bands outermost, and at least one a thread where the plane has the
  // rows: a thread's contiguous share of the units (thread_pool.h) is then a band of rows of every
  // channel, the rows the 1x1 convolutions before and after the layer compute and read on that thread
  // (MobileNetV2 FP16 on two threads: each layer read half its input from the other core's cache).
  size_t units(uint32_t batch, size_t threads) const { return size_t(batch) * bands(threads).count * channels_; }
  // Units [begin, end) of units(batch, threads): x and y are the whole input and output, [N][C][H][W] and
  // [N][C][OH][OW] fp16.
  void run(const uint16_t* x, uint16_t* y, size_t threads, size_t begin, size_t end) const;

 private:
  struct Bands {
    size_t rows, count;  // output rows a band (the last one fewer), bands a plane
  };
  Bands bands(size_t threads) const;

  DepthwiseGeometry g_;
  uint32_t channels_;
  size_t taps_, n_steps_;
  size_t vecs_;           // output vectors a row
  size_t phase_len_;      // floats of one column phase of a band row (a multiple of 16)
  size_t row_floats_;     // floats of a band row: its phases
  size_t group_rows_;     // output rows computed together (1 where a row has eight vectors or more)
  size_t chunk_vecs_;     // vectors of a row computed together
  size_t band_rows_;      // output rows a band computes at most (whole groups)
  size_t band_in_rows_;   // the input rows a whole band reads
  std::vector<size_t> tap_offsets_;  // [S]: tap s's float offset within a band row, from an output's column
  AlignedVector<float> weights_;       // [channels][R][S]
  std::vector<ChannelStep> steps_;   // [channels][n_steps_]
};

}  // namespace softdla::cpu
