// INT8 depthwise convolution on AVX-512 VNNI with VBMI byte permutes: for each kernel row, one 64-byte
// load of the (offset, padded) input row, one vpermb per group of 4 taps to line up each output's taps
// in a dword, and one vpdpbusd. Exact in int32, like depthwise_s8_plane's fp32 lanes, whose results it
// reproduces bit for bit; about a third of their instructions and no widening pass.
//
// Everything that depends only on the geometry and the weights (the permutes, each channel's packed
// weights and offset correction) is prepared once per convolution: a 7x7 plane of MobileNetV2's last
// stages is 7 vector steps, and preparing them per plane cost more than the plane itself.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cpu_isa.h"
#include "depthwise_s8.h"

namespace softdla::cpu {

// Kernel rows x tap groups of 4 the kernel may have (a 7x7 kernel has 14).
inline constexpr uint32_t kMaxDepthwiseVnniSteps = 64;
// int32 values a plane's output buffer needs past OH * OW: whole 16-lane vectors are stored.
inline constexpr size_t kDepthwiseVnniOutSlack = 16;

// The input plane as unsigned bytes (x + 128), zero-padded (128) on every side: the caller's scratch,
// one per thread, reused across planes.
struct DepthwiseVnniPlane {
  size_t rows = 0, stride = 0;
  std::vector<uint8_t> data;
  // The geometry whose padding `data` holds: building another plane of it rewrites only the input
  // columns (every byte a build writes elsewhere is the padding code).
  DepthwiseGeometry padded_for{};
  const uint8_t* row(size_t i) const { return data.data() + i * stride; }
};

class DepthwiseS8Vnni {
 public:
  // Whether the CPU and geometry suit it: AVX-512 VBMI and VNNI, 16 outputs' taps of a kernel row
  // within 64 bytes (stride and dilation small enough), at most kMaxDepthwiseVnniSteps row-groups.
  static bool applies(Isa isa, const DepthwiseGeometry& g);
  // weights: [channels][R][S] int8.
  DepthwiseS8Vnni(const DepthwiseGeometry& g, const int8_t* weights, size_t channels);
  // out[oh * OW + ow] (OH * OW + kDepthwiseVnniOutSlack values) = the sums of channel k over its input
  // plane x. same_input: x is the plane `plane` was last built from, unchanged since (a channel
  // multiplier's next output channel), so it is not rebuilt.
  void run(size_t k, const int8_t* x, int32_t* out, DepthwiseVnniPlane& plane, bool same_input) const;

 private:
  DepthwiseGeometry g_;
  uint32_t groups_ = 0;                 // tap groups of 4 per kernel row
  std::vector<uint8_t> index_;          // [groups][64]: each group's byte permute
  std::vector<int32_t> weights_;        // [channels][R][groups]: 4 taps' weights as one dword
  std::vector<int32_t> start_;          // [channels]: -128 * the channel's weight sum
};

}  // namespace softdla::cpu
