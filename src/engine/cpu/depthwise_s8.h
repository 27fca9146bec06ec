// INT8 depthwise convolution of one plane (one input channel, one output channel), exact, in fp32
// lanes: every product (at most 2^14 in magnitude) and every partial sum (below 2^24 while the
// kernel has fewer than kDepthwiseFloatTaps taps) is an exact integer, and FMA lanes are four times
// as many per cycle as 32-bit integer multiplies. The plane is widened once into zero-padded,
// stride-phased rows, so every tap is a contiguous, unconditional vector load.
#pragma once
#include <cstddef>
#include <cstdint>

#include "cpu_isa.h"

namespace softdla::cpu {

inline constexpr size_t kDepthwiseFloatTaps = 1024;  // taps * 2^14 < 2^24

struct DepthwiseGeometry {
  uint32_t H, W, OH, OW, R, S, sh, sw, dh, dw, pt, pl;
};

// What the kernels reuse from plane to plane (the widened rows, the taps), one per thread: a caller
// running many planes looks up its thread's once (a thread-local look-up per plane cost more than a
// 7x7 plane's work).
struct DepthwiseScratch;
DepthwiseScratch& depthwise_scratch();

// sum of x[i] * w[i] over i < n, exact in int32 while n < 2^17: a depthwise convolution whose one window
// is its whole unpadded plane (a global average pool lowered to a convolution) is one such dot product
// per channel.
int32_t dot_s8(const int8_t* x, const int8_t* w, size_t n);

// out[oh * OW + ow] = sum over taps of x * w (int32), for a plane x [H][W] and weights w [R][S].
// same_input: x is the plane this scratch's previous call used, unchanged since (the next output channel
// of a channel multiplier), so its widened rows are reused.
void depthwise_s8_plane(Isa isa, const DepthwiseGeometry& g, const int8_t* x, const int8_t* w, int32_t* out,
                        bool same_input, DepthwiseScratch& scratch);

// The same over fp16 (bits) or fp32 planes with fp32 weights and sums: out[oh * OW + ow] is the FMA
// chain over the taps in (r, s) order from 0, padding taps included as zeros (every path: the same bits
// on avx2 and AVX-512, std::fma on portable).
void depthwise_f32_plane(Isa isa, const DepthwiseGeometry& g, const uint16_t* x, const float* w, float* out,
                         bool same_input, DepthwiseScratch& scratch);
void depthwise_f32_plane(Isa isa, const DepthwiseGeometry& g, const float* x, const float* w, float* out,
                         bool same_input, DepthwiseScratch& scratch);

}  // namespace softdla::cpu
