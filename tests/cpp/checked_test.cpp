// src/common/checked.h: exact results where they fit, an Error naming the quantity where they do not
// (overflow, negative sizes, NaN or out-of-range floats) — the mechanism behind every size computed
// from input.
#include <gtest/gtest.h>

#include "error_of.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "checked.h"

namespace softdla {
namespace {

using softdla::testing::error_of;

TEST(Checked, ExactResultsWhereTheyFit) {
  EXPECT_EQ(checked_mul(uint64_t(1) << 31, uint64_t(1) << 32, "x"), uint64_t(1) << 63);
  EXPECT_EQ(checked_add(std::numeric_limits<uint64_t>::max() - 1, 1, "x"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(checked_product(std::vector<int64_t>{1, 3, 224, 224}, "x"), 150528u);
  EXPECT_EQ(checked_product(std::vector<int64_t>{}, "x"), 1u);  // a scalar
  EXPECT_EQ(checked_product(std::vector<int64_t>{5, 0, 7}, "x"), 0u);
  EXPECT_EQ(checked_cast<int32_t>(uint64_t(7), "x"), 7);
  EXPECT_EQ(checked_int<int64_t>(-3.9, "x"), -3);  // truncated as a C cast
  EXPECT_EQ(checked_int<int64_t>(-9223372036854775808.0, "x"), std::numeric_limits<int64_t>::min());
}

TEST(Checked, OverflowNamesTheQuantity) {
  // The .npy shapes of issue 17: 2^30 x 2^30 x 4 elements of 4 bytes, and 2^62 elements.
  const std::vector<uint64_t> npy{uint64_t(1) << 30, uint64_t(1) << 30, 4};
  EXPECT_EQ(checked_product(npy, "a.npy shape"), uint64_t(1) << 62);
  const std::string e = error_of([&] { checked_mul(checked_product(npy, "a.npy shape"), 4u, "a.npy data size"); });
  EXPECT_NE(e.find("a.npy data size"), std::string::npos) << e;
  EXPECT_NE(e.find("overflows"), std::string::npos) << e;
  EXPECT_NE(error_of([] { checked_product(std::vector<uint64_t>{uint64_t(1) << 33, uint64_t(1) << 33}, "dims"); }), "");
  EXPECT_NE(error_of([] { checked_add(std::numeric_limits<uint64_t>::max(), 1, "offset"); }), "");
  // The signed result type: int64 counts must fit int64.
  EXPECT_NE(error_of([] { checked_product<int64_t>(std::vector<int64_t>{int64_t(1) << 32, int64_t(1) << 31}, "c"); }), "");
  EXPECT_NE(error_of([] { checked_cast<size_t>(int64_t(-1), "n"); }), "");
  EXPECT_NE(error_of([] { checked_cast<int32_t>(uint64_t(1) << 31, "n"); }), "");
}

TEST(Checked, NegativeSizesAreRejected) {
  const std::string e = error_of([] { checked_product(std::vector<int64_t>{1, -3, 4}, "input 'x' shape"); });
  EXPECT_NE(e.find("input 'x' shape: -3 is negative"), std::string::npos) << e;
  EXPECT_NE(error_of([] { checked_mul(int64_t(-1), int64_t(-1), "m"); }), "");  // -1 x -1 fits, but is no size
  EXPECT_NE(error_of([] { checked_add(int64_t(5), int64_t(-2), "a"); }), "");
}

TEST(Checked, FloatsToIntegers) {
  EXPECT_NE(error_of([] { checked_int<int64_t>(std::nan(""), "Slice starts"); }).find("Slice starts"), std::string::npos);
  EXPECT_NE(error_of([] { checked_int<int64_t>(INFINITY, "x"); }), "");
  EXPECT_NE(error_of([] { checked_int<int64_t>(9223372036854775808.0, "x"); }), "");  // 2^63
  EXPECT_NE(error_of([] { checked_int<int32_t>(1e300, "axis"); }), "");
  EXPECT_NE(error_of([] { checked_int<uint8_t>(256.0, "x"); }), "");
  EXPECT_EQ(checked_int<uint8_t>(255.5, "x"), 255);
}

}  // namespace
}  // namespace softdla
