// Worked examples of every rounding and saturation rule in docs/NUMERICS.md.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

#include "numerics.h"
#include "requant_window.h"

using namespace softdla::num;

TEST(Numerics, RightShiftRoundsHalfAwayFromZero) {
  EXPECT_EQ(rshift_rhaz(5, 1), 3);    // 2.5 -> 3
  EXPECT_EQ(rshift_rhaz(-5, 1), -3);  // -2.5 -> -3 (a plain arithmetic shift gives -3 too, but:)
  EXPECT_EQ(rshift_rhaz(-3, 1), -2);  // -1.5 -> -2 (arithmetic shift with +half would give -1)
  EXPECT_EQ(rshift_rhaz(3, 1), 2);
  EXPECT_EQ(rshift_rhaz(-1, 1), -1);  // -0.5 -> -1
  EXPECT_EQ(rshift_rhaz(1, 1), 1);    // 0.5 -> 1
  EXPECT_EQ(rshift_rhaz(6, 2), 2);    // 1.5 -> 2
  EXPECT_EQ(rshift_rhaz(-6, 2), -2);
  EXPECT_EQ(rshift_rhaz(5, 2), 1);    // 1.25 -> 1
  EXPECT_EQ(rshift_rhaz(-5, 2), -1);
  EXPECT_EQ(rshift_rhaz(7, 0), 7);
  EXPECT_EQ(rshift_rhaz(int64_t(1) << 62, 62), 1);
  EXPECT_EQ(rshift_rhaz(-(int64_t(1) << 62), 62), -1);
}

// The shift is one add and one arithmetic shift; it must equal rounding the magnitude, for every
// shift and for values at the edges of the documented range as well as random ones.
TEST(Numerics, RightShiftMatchesMagnitudeRounding) {
  auto by_magnitude = [](int64_t v, unsigned s) {
    const int64_t mag = v < 0 ? -v : v, half = (int64_t(1) << s) >> 1;
    const int64_t r = (mag + half) >> s;
    return v < 0 ? -r : r;
  };
  const int64_t limit = (int64_t(1) << 62) - 1;
  uint64_t state = 0x9e3779b97f4a7c15ull;
  for (unsigned s = 0; s <= 62; ++s) {
    const int64_t unit = int64_t(1) << s;
    for (int64_t v : {int64_t(0), int64_t(1), int64_t(-1), unit, -unit, unit / 2, -(unit / 2), unit / 2 + 1,
                      -(unit / 2) - 1, unit + unit / 2, -(unit + unit / 2), limit, -limit})
      if (v <= limit && v >= -limit) {
        ASSERT_EQ(rshift_rhaz(v, s), by_magnitude(v, s)) << v << " >> " << s;
      }
    for (int i = 0; i < 2000; ++i) {
      state = state * 6364136223846793005ull + 1442695040888963407ull;
      const int64_t v = int64_t(state >> 1) % limit * ((state & 1) ? 1 : -1);
      ASSERT_EQ(rshift_rhaz(v, s), by_magnitude(v, s)) << v << " >> " << s;
    }
  }
}

TEST(Numerics, Saturation) {
  EXPECT_EQ(sat8(128), 127);
  EXPECT_EQ(sat8(-129), -128);
  EXPECT_EQ(sat8(-128), -128);
  EXPECT_EQ(sat32(int64_t(1) << 40), INT32_MAX);
  EXPECT_EQ(sat32(-(int64_t(1) << 40)), INT32_MIN);
  EXPECT_EQ(rescale32(INT32_MAX, INT32_MAX, 0), INT32_MAX);
  EXPECT_EQ(rescale32(INT32_MIN, INT32_MAX, 0), INT32_MIN);
  EXPECT_EQ(rescale32(1000, 3, 2), 750);
}

TEST(Numerics, DivisionRoundsHalfAway) {
  EXPECT_EQ(div_rhaz(3, 2), 2);
  EXPECT_EQ(div_rhaz(-3, 2), -2);
  EXPECT_EQ(div_rhaz(5, 4), 1);
  EXPECT_EQ(div_rhaz(-7, 4), -2);
  EXPECT_EQ(div_rhaz(-5, 4), -1);
}

TEST(Numerics, Q16Reciprocals) {
  EXPECT_EQ(q16_reciprocal(1), 0x10000);
  EXPECT_EQ(q16_reciprocal(2), 0x8000);
  EXPECT_EQ(q16_reciprocal(3), 0x5555);
  EXPECT_EQ(q16_reciprocal(5), 0x3333);
  EXPECT_EQ(q16_reciprocal(6), 0x2aab);
  EXPECT_EQ(q16_reciprocal(7), 0x2492);
  EXPECT_EQ(q16_reciprocal(8), 0x2000);
}

TEST(Numerics, QuantizeTiesAwayAndSaturates) {
  EXPECT_EQ(quantize(0.5f), 1);
  EXPECT_EQ(quantize(-0.5f), -1);
  EXPECT_EQ(quantize(1.5f), 2);
  EXPECT_EQ(quantize(2.5f), 3);  // round-half-even would give 2
  EXPECT_EQ(quantize(-2.5f), -3);
  EXPECT_EQ(quantize(0.49999997f), 0);
  EXPECT_EQ(quantize(127.5f), 127);
  EXPECT_EQ(quantize(-1000.f), -128);
  EXPECT_EQ(quantize(std::numeric_limits<float>::infinity()), 127);
  EXPECT_EQ(quantize(std::nanf("")), 0);
}

TEST(Numerics, HalfRoundTripsEveryCode) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = half_to_float(uint16_t(h));
    if (std::isnan(f)) {
      EXPECT_EQ(float_to_half(f), 0x7e00) << h;  // one NaN, whatever the sign and payload
    } else if (std::isinf(f)) {
      EXPECT_EQ(float_to_half(f), (h & 0x8000) | 0x7bff) << h;  // saturates, never infinity
    } else {
      EXPECT_EQ(float_to_half(f), h) << h;
    }
  }
}

TEST(Numerics, HalfRoundsToNearestEvenAndSaturates) {
  EXPECT_EQ(float_to_half(1.0f + 1.0f / 2048), 0x3c00);           // tie -> even (1.0)
  EXPECT_EQ(float_to_half(1.0f + 3.0f / 2048), 0x3c02);           // tie -> even (1 + 2/1024)
  EXPECT_EQ(float_to_half(1.0f + 1.5f / 2048), 0x3c01);           // above the tie
  EXPECT_EQ(float_to_half(-(1.0f + 1.0f / 2048)), 0xbc00);
  EXPECT_EQ(float_to_half(65504.f), 0x7bff);
  EXPECT_EQ(float_to_half(65519.f), 0x7bff);
  EXPECT_EQ(float_to_half(1e9f), 0x7bff);
  EXPECT_EQ(float_to_half(-1e9f), 0xfbff);
  EXPECT_EQ(float_to_half(std::ldexp(1.f, -24)), 0x0001);         // smallest subnormal
  EXPECT_EQ(float_to_half(std::ldexp(1.f, -25)), 0x0000);         // tie with 0 -> even
  EXPECT_EQ(float_to_half(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(float_to_half(std::ldexp(3.f, -25)), 0x0002);         // 1.5 subnormal ulps -> even 2
  EXPECT_EQ(float_to_half(std::ldexp(1023.5f, -24)), 0x0400);     // rounds up into the normals
  EXPECT_EQ(float_to_half(-0.f), 0x8000);
  EXPECT_EQ(float_to_half(std::nanf("")), 0x7e00);
  EXPECT_EQ(float_to_half(-std::nanf("")), 0x7e00);                // inf - inf's default NaN is negative on x86
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::infinity() - std::numeric_limits<float>::infinity()), 0x7e00);
}

#include "sha256.h"

TEST(Sha256, StandardVectors) {
  const std::string abc = "abc";
  EXPECT_EQ(softdla::sha256_hex(reinterpret_cast<const uint8_t*>(abc.data()), abc.size()),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(softdla::sha256_hex(nullptr, 0), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  const std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  EXPECT_EQ(softdla::sha256_hex(reinterpret_cast<const uint8_t*>(two_blocks.data()), two_blocks.size()),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  const std::string million(1000000, 'a');
  EXPECT_EQ(softdla::sha256_hex(reinterpret_cast<const uint8_t*>(million.data()), million.size()),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// The GPU epilogue's windowed requantization (requant_window.h) must give the direct form's bytes for
// every accumulator: random channels (builder-like and arbitrary multipliers, every shift, with and
// without bias, ReLU and Clip) at random accumulators, the int32 extremes, both ends of the window and
// the points where acc + b changes sign.
TEST(Numerics, RequantWindowEqualsDirectForm) {
  uint64_t state = 0x243f6a8885a308d3ull;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return uint32_t(state >> 32);
  };
  int applied = 0, channels = 0, nonnegative_checks = 0;
  for (int c = 0; c < 20000; ++c) {
    const unsigned s = c % 4 ? 20 + next() % 26 : 1 + next() % 62;
    int32_t m = c % 3 ? int32_t((1u << 30) + next() % (1u << 30)) : int32_t(next());
    if (c % 7 == 0 && m != INT32_MIN) m = -m;
    if (c % 97 == 0) m = 0;
    const int32_t b = c % 5 == 0 ? 0 : (c % 5 == 1 ? int32_t(next()) : int32_t(next() % 200001) - 100000);
    int32_t lo = INT32_MIN, hi = INT32_MAX;
    if (c % 3 == 1) lo = 0;
    if (c % 3 == 2) lo = int32_t(next() % 1000) - 500, hi = lo + int32_t(next() % 100000);
    const auto w = make_requant_window(b, lo, hi, m, s);
    ++channels;
    if (!w) continue;
    ++applied;
    std::vector<int64_t> accs = {INT32_MIN, INT32_MAX, 0, -1, 1, w->lo, w->hi, int64_t(w->lo) - 1, int64_t(w->lo) + 1,
                                 int64_t(w->hi) - 1, int64_t(w->hi) + 1, -int64_t(b), -int64_t(b) + 1, -int64_t(b) - 1};
    for (int i = 0; i < 200; ++i) accs.push_back(i % 2 ? int32_t(next()) : int32_t(next() % 4096) - 2048);
    for (int64_t a64 : accs) {
      if (a64 < INT32_MIN || a64 > INT32_MAX) continue;
      const int32_t acc = int32_t(a64);
      const int8_t want = requant_direct(acc, b, lo, hi, m, s);
      ASSERT_EQ(sat8(requant_window_value(acc, *w)), want)
          << "acc " << acc << " b " << b << " lo " << lo << " hi " << hi << " m " << m << " s " << s;
      if (w->shifts & RequantWindow::kNonNegative) {
        ++nonnegative_checks;
        ASSERT_EQ(sat8(requant_window_nonnegative(acc, *w)), want)
            << "acc " << acc << " b " << b << " lo " << lo << " hi " << hi << " m " << m << " s " << s;
      }
    }
  }
  // Builder-like multipliers (|m| in [2^30, 2^31)) always take the fast form.
  EXPECT_GT(applied, channels * 9 / 10) << applied << " of " << channels;
  EXPECT_GT(nonnegative_checks, 100000);  // the ReLU channels take the short form
}

// Exact rounding ties (small shifts make them frequent): every accumulator in a range.
TEST(Numerics, RequantWindowTiesEveryAccumulator) {
  for (unsigned s : {1u, 2u, 3u, 5u, 8u, 31u, 32u, 33u, 40u})
    for (int32_t m : {1, 3, -3, 5, 1 << 30, -(1 << 30), INT32_MAX, INT32_MIN + 1})
      for (int32_t b : {0, 7, -7, INT32_MAX, INT32_MIN})
        for (auto [lo, hi] : {std::pair{INT32_MIN, INT32_MAX}, std::pair{0, INT32_MAX}, std::pair{-40, 90}}) {
          const auto w = make_requant_window(b, lo, hi, m, s);
          if (!w) continue;
          const bool nonnegative = w->shifts & RequantWindow::kNonNegative;
          for (int64_t a = -5000; a <= 5000; ++a) {
            const int8_t want = requant_direct(int32_t(a), b, lo, hi, m, s);
            ASSERT_EQ(sat8(requant_window_value(int32_t(a), *w)), want) << "acc " << a << " b " << b << " m " << m << " s " << s;
            if (nonnegative) {
              ASSERT_EQ(sat8(requant_window_nonnegative(int32_t(a), *w)), want) << "acc " << a << " m " << m << " s " << s;
            }
          }
          for (int64_t a : {int64_t(w->lo) - 3, int64_t(w->hi) + 3, -int64_t(b)})
            for (int64_t d = -3000; d <= 3000; ++d) {
              if (a + d < INT32_MIN || a + d > INT32_MAX) continue;
              ASSERT_EQ(sat8(requant_window_value(int32_t(a + d), *w)),
                        requant_direct(int32_t(a + d), b, lo, hi, m, s))
                  << "acc " << a + d << " b " << b << " m " << m << " s " << s;
            }
        }
}

// fold_rounding_sign: a window it changes gives the direct form's bytes for every accumulator of the
// window and around it (small shifts and multipliers with many factors of two make ties frequent; the
// builder-like ones rarely have any), and it changes some windows and leaves those with ties.
TEST(Numerics, FoldedRoundingSignKeepsTheBytes) {
  uint64_t state = 0x13198a2e03707344ull;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return uint32_t(state >> 32);
  };
  int folded = 0, kept = 0;
  for (int c = 0; c < 4000; ++c) {
    const unsigned s = c % 2 ? 1 + next() % 14 : 30 + next() % 16;
    int32_t m = c % 2 ? int32_t(1 + next() % 97) << (next() % 12) : int32_t((1u << 30) + next() % (1u << 30));
    if (c % 3 == 0) m = -m;
    if (c % 101 == 0) m = 0;
    const int32_t b = c % 4 == 0 ? 0 : int32_t(next() % 20001) - 10000;
    int32_t lo = INT32_MIN, hi = INT32_MAX;
    if (c % 5 == 1) lo = int32_t(next() % 1000) - 500, hi = lo + int32_t(next() % 100000);
    const auto w = make_requant_window(b, lo, hi, m, s);
    if (!w || (w->shifts & RequantWindow::kNonNegative)) continue;
    RequantWindow f = *w;
    if (!fold_rounding_sign(f)) {
      ++kept;
      continue;
    }
    ++folded;
    ASSERT_TRUE(f.shifts & RequantWindow::kNonNegative);
    // Every accumulator of the window when it is small, else its ends and random ones inside.
    const int64_t first = std::max<int64_t>(int64_t(f.lo) - 50, INT32_MIN);
    const int64_t last = std::min<int64_t>(int64_t(f.hi) + 50, INT32_MAX);
    std::vector<int64_t> accs;
    if (last - first <= 300000) {
      for (int64_t a = first; a <= last; ++a) accs.push_back(a);
    } else {
      for (int i = 0; i < 20000; ++i) accs.push_back(first + int64_t(next() % uint64_t(last - first + 1)));
      for (int64_t d = 0; d < 2000; ++d) accs.push_back(first + d), accs.push_back(last - d);
    }
    for (int64_t a : accs)
      ASSERT_EQ(sat8(requant_window_nonnegative(int32_t(a), f)), requant_direct(int32_t(a), b, lo, hi, m, s))
          << "acc " << a << " b " << b << " lo " << lo << " hi " << hi << " m " << m << " s " << s;
  }
  EXPECT_GT(folded, 500);
  EXPECT_GT(kept, 50);
}

// The residual add's window form (requant_window.h) over every (x, e) pair of int8 values, for the
// parameters the builder produces (Scale 2^16, no shift) and for random ones.
TEST(Numerics, ResidualWindowEqualsDirectFormForEveryPair) {
  uint64_t state = 0x13198a2e03707344ull;
  auto next = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return uint32_t(state >> 32);
  };
  int applied = 0, plain_checks = 0;
  for (int c = 0; c < 60; ++c) {
    const bool has_scale = c % 4 != 3;
    const int32_t sm = c % 2 ? 65536 : int32_t((1u << 30) + next() % (1u << 30)) * (c % 5 == 0 ? -1 : 1);
    const unsigned ss = c % 2 ? 0 : 12 + next() % 20;
    const int32_t tm = int32_t((1u << 30) + next() % (1u << 30)) * (c % 7 == 0 ? -1 : 1);
    const unsigned ts = 8 + next() % 30;
    const int32_t lo = c % 3 == 0 ? INT32_MIN : (c % 3 == 1 ? 0 : -int32_t(next() % 100000));
    const int32_t hi = c % 3 == 2 ? int32_t(next() % 3000000) : INT32_MAX;
    const int32_t m = int32_t((1u << 30) + next() % (1u << 30));
    const unsigned s = 20 + next() % 30;
    const auto w = make_residual_window(has_scale, sm, ss, tm, ts, lo, hi, m, s);
    if (!w) continue;
    ++applied;
    const bool nonnegative = w->out.shifts & RequantWindow::kNonNegative;
    for (int x = -128; x < 128; ++x)
      for (int e = -128; e < 128; ++e) {
        const int8_t want = residual_direct(x, e, has_scale, sm, ss, tm, ts, lo, hi, m, s);
        ASSERT_EQ(sat8(residual_window_value(x, e, *w)), want) << "x " << x << " e " << e << " case " << c;
        if (nonnegative) {
          ASSERT_EQ(sat8(residual_window_value<true>(x, e, *w)), want) << "x " << x << " e " << e;
        }
        if (w->x_product) {
          ++plain_checks;
          ASSERT_EQ(sat8(residual_window_value<false, true>(x, e, *w)), want) << "x " << x << " e " << e;
          if (nonnegative) {
            ASSERT_EQ(sat8(residual_window_value<true, true>(x, e, *w)), want) << "x " << x << " e " << e;
          }
        }
      }
  }
  EXPECT_GT(applied, 40);
  EXPECT_GT(plain_checks, 65536 * 20);  // Scale 2^16 without a shift, and no Scale step, take the product
}
