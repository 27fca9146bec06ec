// INT8 depthwise convolution on AVX-512 VNNI with VBMI byte permutes: for each kernel row, one masked
// 64-byte load of the input row (its padding columns masked off), offset to unsigned bytes, one vpermb
// per group of 4 taps to line up each output's taps in a dword, and one vpdpbusd. Exact in int32, like
// depthwise_s8_plane's fp32 lanes, whose results it reproduces bit for bit; about a third of their
// instructions and no widening pass.
//
// The rows are read straight from the plane: the mask puts each input column in the lane the padded row
// would hold it in, and padding lanes load as zero, offset to the padding code 128. (A padded copy of
// the plane, built first, cost as much as the convolution on MobileNetV2's 7x7 and 14x14 planes: its
// unaligned stores fed loads that straddled them.)
//
// Everything that depends only on the geometry and the weights (the permutes, the load masks, each
// channel's packed weights and offset correction) is prepared once per convolution: a 7x7 plane of
// MobileNetV2's last stages is 7 vector steps, and preparing them per plane cost more than the plane.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "aligned_vector.h"
#include "cpu_isa.h"
#include "depthwise_s8.h"

namespace softdla::cpu {

// Kernel rows x tap groups of 4 the kernel may have (a 7x7 kernel has 14).
inline constexpr uint32_t kMaxDepthwiseVnniSteps = 64;
// int32 values a plane's output buffer needs past OH * OW: whole 16-lane vectors are stored.
inline constexpr size_t kDepthwiseVnniOutSlack = 16;

class DepthwiseS8Vnni {
 public:
  // Whether the CPU and geometry suit it: AVX-512 VBMI and VNNI, 16 outputs' taps of a kernel row
  // within 64 bytes (stride and dilation small enough), at most kMaxDepthwiseVnniSteps row-groups.
  static bool applies(Isa isa, const DepthwiseGeometry& g);
  // weights: [channels][R][S] int8.
  DepthwiseS8Vnni(const DepthwiseGeometry& g, const int8_t* weights, size_t channels);
  // out[oh * OW + ow] (OH * OW + kDepthwiseVnniOutSlack values) = the sums of channel k over its input
  // plane x.
  void run(size_t k, const int8_t* x, int32_t* out) const;

 private:
  DepthwiseGeometry g_;
  uint32_t groups_ = 0;                 // tap groups of 4 per kernel row
  AlignedVector<uint8_t> index_;          // [groups][64]: each group's byte permute
  // Per block of 16 output columns: the offset of its load from the input row's start (negative in the
  // left padding) and the lanes that hold input columns.
  std::vector<int64_t> block_offset_;
  std::vector<uint64_t> block_mask_;
  AlignedVector<int32_t> weights_;        // [channels][R][groups]: 4 taps' weights as one dword
  std::vector<int32_t> start_;          // [channels]: -128 * the channel's weight sum
};

}  // namespace softdla::cpu
