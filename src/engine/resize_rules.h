// The coordinate rules of integer-factor resize (docs/NUMERICS.md §Resize), shared by every backend so
// that nearest and INT8 bilinear pick the same sources and weights everywhere.
#pragma once
#include <cstdint>

#include "hd.h"
#include "model.h"

namespace softdla {

// Source index of output index i for nearest resize by integer factor s, clamped to [0, n).
SOFTDLA_HD inline int64_t nearest_source(int64_t i, int64_t s, int64_t n, NearestRounding rule) {
  int64_t src;
  switch (rule) {
    case NearestRounding::kAsymmetricFloor: src = i / s; break;
    // half-pixel x = (2i + 1 - s) / (2s); round half down = ceil(x - 1/2), half up = floor(x + 1/2)
    case NearestRounding::kHalfPixelRoundDown: {
      const int64_t num = 2 * i + 1 - 2 * s, den = 2 * s;
      src = num >= 0 ? (num + den - 1) / den : -((-num) / den);
      break;
    }
    default: src = (2 * i + 1) / (2 * s); break;
  }
  return src < 0 ? 0 : (src > n - 1 ? n - 1 : src);
}

// Bilinear taps along one axis: source x0, x1 and weight of x1 as frac / den, den = 2s.
struct Taps { int64_t x0, x1, frac; };
SOFTDLA_HD inline Taps bilinear_taps(int64_t i, int64_t s, int64_t n) {
  const int64_t den = 2 * s;
  int64_t num = 2 * i + 1 - s;
  num = num > 0 ? num : 0;  // x = num / den, clamped at 0
  int64_t x0 = num / den, frac = num % den;
  if (x0 >= n - 1) x0 = n - 1, frac = 0;
  return {x0, x0 + 1 < n - 1 ? x0 + 1 : n - 1, frac};
}

}  // namespace softdla
