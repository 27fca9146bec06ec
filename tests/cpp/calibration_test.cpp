// The entropy calibrator's threshold on activation distributions whose right answer is known from the
// distribution itself (not from the code under test): ReLU outputs with their spike of exact zeros,
// long-tailed activations with rare outliers, uniform data with no tail to cut.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "calibrate.h"

namespace softdla::builder {
namespace {

constexpr size_t kBins = 2048;

struct Histogram {
  std::vector<double> bins = std::vector<double>(kBins, 0.0);
  double max = 0;
};

// Histogram of |x| over [0, max|x|], as the calibrator builds it.
Histogram histogram_of(const std::vector<double>& xs) {
  Histogram h;
  for (double x : xs) h.max = std::max(h.max, std::fabs(x));
  for (double x : xs) h.bins[std::min(kBins - 1, size_t(std::fabs(x) * double(kBins) / h.max))] += 1;
  return h;
}

// Half of the values exactly zero (a ReLU on centred data), the other half |N(0, 1)|.
std::vector<double> relu_output(size_t n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> xs(n);
  for (double& x : xs) x = std::max(0.0, normal(rng));
  return xs;
}

TEST(EntropyCalibrator, KeepsMostOfAReluRange) {
  const Histogram h = histogram_of(relu_output(1'000'000, 1));
  const double t = entropy_threshold(h.bins, h.max);
  // The spike of zeros must not pull the threshold down to a fraction of the range: a half-normal's
  // KL-optimal 128-level threshold lies around 3-4 sigma (the maximum of 10^6 samples is ~4.9 sigma).
  EXPECT_GT(t, 2.5) << "max " << h.max;
  EXPECT_LE(t, h.max);
}

TEST(EntropyCalibrator, ZeroSpikeDoesNotMoveTheThreshold) {
  std::vector<double> xs = relu_output(400'000, 2);
  std::vector<double> positive;
  for (double x : xs)
    if (x > 0) positive.push_back(x);
  const Histogram with_zeros = histogram_of(xs), without = histogram_of(positive);
  ASSERT_DOUBLE_EQ(with_zeros.max, without.max);
  const double a = entropy_threshold(with_zeros.bins, with_zeros.max);
  const double b = entropy_threshold(without.bins, without.max);
  EXPECT_NEAR(a, b, 0.05 * b);
}

TEST(EntropyCalibrator, CutsRareOutliers) {
  std::mt19937_64 rng(3);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<double> xs(1'000'000);
  for (double& x : xs) x = normal(rng);
  for (size_t k = 0; k < 50; ++k) xs[k * 997] = 60.0 * (k % 2 ? 1 : -1) + normal(rng);  // 0.005 % far outliers
  const Histogram h = histogram_of(xs);
  const double t = entropy_threshold(h.bins, h.max);
  EXPECT_LT(t, 10.0) << "outliers at 60 sigma should be clipped";
  EXPECT_GT(t, 2.5);
}

TEST(EntropyCalibrator, KeepsTheWholeRangeOfUniformData) {
  std::mt19937_64 rng(4);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  std::vector<double> xs(500'000);
  for (double& x : xs) x = uniform(rng);
  const Histogram h = histogram_of(xs);
  EXPECT_GT(entropy_threshold(h.bins, h.max), 0.9 * h.max);
}

}  // namespace
}  // namespace softdla::builder
