// INT8 depthwise convolution of one plane on AVX-512 VNNI with VBMI byte permutes: for each kernel row,
// one 64-byte load of the (offset, padded) input row, one vpermb per group of 4 taps to line up each
// output's taps in a dword, and one vpdpbusd. Exact in int32, like depthwise_s8_plane's fp32 lanes,
// whose results it reproduces bit for bit; about a third of their instructions and no widening pass.
#pragma once
#include <cstddef>
#include <cstdint>

#include "cpu_isa.h"
#include "depthwise_s8.h"

namespace softdla::cpu {

// Kernel rows x tap groups of 4 the kernel may have (a 7x7 kernel has 14).
inline constexpr uint32_t kMaxDepthwiseVnniSteps = 64;

// The CPU must have what depthwise_s8_plane_vnni needs: cpu_has_avx512_vbmi() (cpu_isa.h).
// Whether the geometry suits it: 16 outputs' taps of a kernel row within 64 bytes (stride and dilation
// small enough), and at most kMaxDepthwiseVnniSteps row-groups.
bool depthwise_s8_vnni_fits(const DepthwiseGeometry& g);
// depthwise_s8_plane's contract (out[oh * OW + ow] = sum of x * w over the taps), for a CPU and
// geometry the two functions above accept.
void depthwise_s8_plane_vnni(const DepthwiseGeometry& g, const int8_t* x, const int8_t* w, int32_t* out,
                             bool same_input);

}  // namespace softdla::cpu
