#include "int8_tables.h"

#include <algorithm>
#include <cmath>

#include "numerics.h"

namespace softdla::num {
namespace {
int8_t sat8_32(int32_t v) { return int8_t(std::clamp(v, -128, 127)); }
}  // namespace

std::array<int8_t, 256> activation_lut(ActivationLut kind, float in_scale, float out_scale) {
  std::array<int8_t, 256> table{};
  for (int q = -128; q <= 127; ++q) {
    const double x = round_to_half(float(q) * in_scale);  // dequantize into fp16
    const double y = kind == ActivationLut::kSigmoid ? 1.0 / (1.0 + std::exp(-x)) : std::tanh(x);
    const double h = round_to_half(float(y));              // the FP16 result
    table[size_t(q + 128)] = quantize(float(std::round(h / double(out_scale))));
  }
  return table;
}

SharedScaleSum shared_scale_sum(const ResidualWindow& w) {
  const bool nonnegative = w.out.shifts & RequantWindow::kNonNegative, plain = w.x_product != 0;
  auto exact = [&](int32_t x, int32_t e) {
    if (nonnegative) return sat8_32(plain ? residual_window_value<true, true>(x, e, w)
                                          : residual_window_value<true, false>(x, e, w));
    return sat8_32(plain ? residual_window_value<false, true>(x, e, w)
                         : residual_window_value<false, false>(x, e, w));
  };
  // g[u + 256]: the result for x + e = u (x as large as it can be); then every pair must agree with it.
  int8_t g[511];
  for (int32_t u = -256; u <= 254; ++u) {
    const int32_t x = std::clamp(u, -128, 127);
    g[u + 256] = exact(x, u - x);
  }
  for (int32_t x = -128; x < 128; ++x)
    for (int32_t e = -128; e < 128; ++e)
      if (exact(x, e) != g[x + e + 256]) return {};
  // The slope of the result in u: x's rescale (a plain product, or mult / 2^shift) times the output's.
  const double x_scale = plain ? double(w.x_product) : std::ldexp(double(w.x.mult), -int(w.x.shifts & 255u));
  const double slope = x_scale * std::ldexp(double(w.out.mult), -int(w.out.shifts & 255u));
  const int32_t lo = g[0], hi = g[510];
  if (lo > hi) return {};  // a falling result (a negative output multiplier) keeps the exact form
  for (unsigned s = 24; s >= 1; --s) {
    const double ideal = std::ldexp(slope, int(s));
    if (!(std::fabs(ideal) < double(1 << 22))) continue;  // 256 * |mult| + |add| within int32
    const int64_t base = std::llround(ideal), half = int64_t(1) << (s - 1);
    for (int64_t m = base - 1; m <= base + 1; ++m)
      for (int64_t add = half - 2; add <= half + 2; ++add) {
        bool same = true;
        for (int32_t u = -256; u <= 254 && same; ++u)
          same = std::clamp(int32_t((u * m + add) >> s), lo, hi) == g[u + 256];
        if (same) return {int32_t(m), int32_t(add), s, lo, hi, true};
      }
  }
  return {};
}

}  // namespace softdla::num
