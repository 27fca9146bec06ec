// INT8 requantization runs in the shortcut forms of requant_window.h, vectorised per instruction set
// (AVX-512, AVX2) with a plain C++ fallback; every path gives the bytes of the direct form.
#pragma once
#include <cstddef>
#include <cstdint>

#include "cpu_isa.h"
#include "int8_tables.h"
#include "requant_window.h"

namespace softdla::cpu {

// An int8 rescale (requant_window.h's Int8Rescale: v * mult >> s, rounded half away from zero) in 32-bit
// arithmetic: (v * mult + half + (v * mult < 0 ? -1 : 0)) >> shift with |v * mult| < 2^30, where a
// multiplier and shift exist that give the same value for all 256 int8 v (checked exhaustively when
// made; `ok` false otherwise). A vector of them is one 32-bit multiply, two adds and two shifts instead of
// two 64-bit multiplies on even and odd lanes and their rounding.
struct NarrowRescale {
  int32_t mult = 0, half = 0;
  uint32_t shift = 0;
  bool ok = false;
};
NarrowRescale narrow_rescale(const num::Int8Rescale& r);

// The shared-scale form of a residual add (int8_tables.h).
using num::shared_scale_sum;
using num::SharedScaleSum;

// A residual add's window with its two int8 rescales in the narrow form where they have one, and the
// shared-scale form where it has that.
struct ResidualForm {
  num::ResidualWindow w;
  NarrowRescale x, e;
  SharedScaleSum sum;
  // Where the add is fused into a convolution: every channel's requantization window maps the
  // accumulators into int8 (num::window_in_int8), so the convolution's value needs no saturation before the add.
  bool conv_in_range = false;
  // The shared-scale form may leave out that saturation and its own upper clamp (127 or more: the final
  // int8 saturation applies it).
  bool trimmed() const { return sum.ok && conv_in_range && sum.hi >= 127; }
};
ResidualForm residual_form(const num::ResidualWindow& w);

// Where a convolution's int8 results go when its kernel requantizes them itself: row (output channel) r,
// column (output pixel) j of image n requantized with windows[r] into out[n * image_stride + r * ld + j],
// or with `residual`, the add of that and other[the same index] (the add's other input; conv_second:
// the convolution is the add's second input).
struct Int8Output {
  const num::RequantWindow* windows = nullptr;
  int8_t* out = nullptr;
  size_t ld = 0, image_stride = 0;
  const ResidualForm* residual = nullptr;
  const int8_t* other = nullptr;
  bool conv_second = false;
};

// out[i] = sat8(requant_window_value(acc[i], w)) (the non-negative form when w has the flag).
void requantize_window(Isa isa, const int32_t* acc, const num::RequantWindow& w, int8_t* out, size_t count);

// out[i] = sat8(requant_window_value(acc[i], windows[i])): each value with its own window (a fully
// connected layer's outputs, one per channel), the per-element form of every path.
void requantize_windows(const int32_t* acc, const num::RequantWindow* windows, int8_t* out, size_t count);

// The same from int8 values (a standalone SDP op of the form [Bias] [ReLU | Clip] requantize).
void requantize_window_s8(Isa isa, const int8_t* x, const num::RequantWindow& w, int8_t* out, size_t count);

// out[i] = sat8(residual_window_value(x[i], e[i], w)): the residual add of two int8 tensors.
void residual_add(Isa isa, const int8_t* x, const int8_t* e, const ResidualForm& w, int8_t* out, size_t count);

// requantize_window then residual_add in one pass, the convolution's int8 results kept in registers:
// `other` is the add's other input at the same elements, and conv_second says the convolution is the
// add's second input (e) rather than its first (x).
void requantize_residual(Isa isa, const int32_t* acc, const num::RequantWindow& w, const int8_t* other,
                         const ResidualForm& rw, bool conv_second, int8_t* out, size_t count);

}  // namespace softdla::cpu
