// Worked examples of every rounding and saturation rule in docs/NUMERICS.md.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "numerics.h"

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
      EXPECT_TRUE(std::isnan(half_to_float(float_to_half(f))));
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
  EXPECT_TRUE(std::isnan(half_to_float(float_to_half(std::nanf("")))));
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
