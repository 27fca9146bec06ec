// INT8 constants every backend derives the same way on the host, once per layer: the activation table of
// a LUT step, and the 32-bit form of a residual add on one shared scale. The CPU kernels and the CUDA
// epilogues both use them, so they live beside the numerics rather than in either backend.
#pragma once
#include <array>
#include <cstdint>

#include "model.h"
#include "requant_window.h"

namespace softdla::num {

// The 256-entry int8 -> int8 activation table of docs/NUMERICS.md (sigmoid/tanh in FP16).
std::array<int8_t, 256> activation_lut(ActivationLut kind, float in_scale, float out_scale);

// A residual add whose result depends on u = x + e alone, in 32-bit arithmetic:
//
//     out = clamp((u * mult + add) >> shift, lo, hi)     (u in [-256, 254], the shift arithmetic)
//
// The add of two operands on one scale has that form (softdla's builder always gives them one: the DLA
// adds codes, so both sides of an Add share a calibration group). Found by a search and checked against
// the exact form for every pair of int8 operands when made; `ok` false when the add depends on x and e
// apart, or no such constants exist. One add, one 32-bit multiply, an add, a shift and a clamp replace
// the two rescales, their sum and the output window's 64-bit products.
struct SharedScaleSum {
  int32_t mult = 0, add = 0;
  uint32_t shift = 0;
  int32_t lo = 0, hi = 0;
  bool ok = false;
};
SharedScaleSum shared_scale_sum(const ResidualWindow& w);

}  // namespace softdla::num
