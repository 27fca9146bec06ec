// FP16 depthwise convolution sixteen channels at a time on AVX-512, eight on AVX2 with F16C (one input
// channel per output channel), with its SDP chain of channel steps and the fp16 store fused into the same
// pass.
//
// Why: the plane-by-plane kernel (depthwise_f32_plane) widens each plane into a padded fp32 copy, runs
// 16 output columns per vector, stores fp32 sums and then runs the chain and the fp16 store as two more
// passes. On MobileNet-class nets that is mostly overhead: a 7x7 plane fills 7 of 16 lanes, and the
// passes around the FMAs cost more than the FMAs. Here a vector holds one pixel of sixteen channels, so
// every lane is used whatever the plane's width, each tap's weights are one vector, and the steps take
// each channel's operand in its own lane.
//
// Layout: for each block of sixteen channels (on AVX2, each half of it in turn), the input rows a band of
// output rows needs are widened and transposed into a ring of padded rows of [column][16 channels] fp32
// ([column][8 channels] on AVX2; zero columns and a zero row for the padding); eight output pixels are
// computed at a time, each the FMA chain over the taps in (r, s) order from zero with the padding taps
// included as zeros, exactly as depthwise_f32_plane does per element, so the results are the same bits
// on every path; then the chain's steps, the rounding to fp16 (numerics.h) and a transpose back to the
// channels' planes.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "aligned_vector.h"
#include "channel_lanes.h"
#include "cpu_isa.h"
#include "depthwise_s8.h"
#include "sdp_chain.h"

namespace softdla::cpu {

class DepthwiseF16Blocks {
 public:
  // Whether the CPU and the layer suit it: the AVX-512 path, or AVX2 with F16C, and a chain of at most kMaxChannelSteps
  // channel steps (the caller passes them); any geometry.
  static bool applies(Isa isa);
  // weights: [channels][R][S] fp32 (the fp16 weights widened, all finite); steps: [channels][n_steps]
  // (SdpChain::channel_steps), every channel with the same kinds.
  DepthwiseF16Blocks(const DepthwiseGeometry& g, uint32_t channels, const float* weights,
                     const std::vector<ChannelStep>& steps);

  // Work units for a batch on `threads` threads: (image, block of 16 channels, band of output rows), with
  // bands enough to give every thread several units.
  size_t units(uint32_t batch, size_t threads) const;
  // Units [begin, end) of units(batch, threads): x and y are the whole input and output, [N][C][H][W]
  // and [N][C][OH][OW] fp16.
  void run(const uint16_t* x, uint16_t* y, uint32_t batch, size_t threads, size_t begin, size_t end) const;

 private:
  uint32_t bands(uint32_t batch, size_t threads) const;
  template <class Kernel>
  void run_groups(const uint16_t* x, uint16_t* y, uint32_t batch, size_t threads, size_t begin, size_t end) const;
  void run_avx512(const uint16_t* x, uint16_t* y, uint32_t batch, size_t threads, size_t begin, size_t end) const;
  void run_avx2(const uint16_t* x, uint16_t* y, uint32_t batch, size_t threads, size_t begin, size_t end) const;
  DepthwiseGeometry g_;
  uint32_t channels_, blocks_;
  size_t taps_, padded_width_;  // padded_width_: columns of a ring row
  AlignedVector<float> weights_;  // [block][tap][16]
  ChannelLanes lanes_;          // the chain's steps, sixteen channels a vector
  bool wide_;                   // the AVX-512 kernels, else the AVX2 ones
};

}  // namespace softdla::cpu
