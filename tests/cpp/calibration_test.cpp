// The entropy calibrator's threshold on activation distributions whose right answer is known from the
// distribution itself (not from the code under test): ReLU outputs with their spike of exact zeros,
// long-tailed activations with rare outliers, uniform data with no tail to cut.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "calibrate.h"
#include "histogram.h"

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


// The textbook forms of the two searches, one candidate at a time, written independently of the
// prefix-sum versions in calibrate.cpp: the divergence / squared error of every candidate of i bins.
std::vector<double> naive_kl(std::vector<double> hist) {
  const size_t nb = hist.size(), levels = 128;
  hist[0] = hist[1];
  std::vector<double> kl(nb + 1, INFINITY);
  for (size_t i = levels; i <= nb; ++i) {
    std::vector<double> p(hist.begin(), hist.begin() + long(i)), q(i, 0.0);
    for (size_t j = i; j < nb; ++j) p[i - 1] += hist[j];
    const double merged = double(i) / double(levels);
    for (size_t j = 0; j < levels; ++j) {
      const size_t start = size_t(double(j) * merged), end = j + 1 == levels ? i : size_t(double(j + 1) * merged);
      double total = 0, nonzero = 0;
      for (size_t k = start; k < end; ++k) total += hist[k], nonzero += hist[k] != 0;
      for (size_t k = start; k < end; ++k) q[k] = hist[k] != 0 ? total / nonzero : 0.0;
    }
    double ps = 0, qs = 0, d = 0;
    for (size_t k = 0; k < i; ++k) ps += p[k], qs += q[k];
    for (size_t k = 0; k < i; ++k)
      if (p[k] > 0) d += q[k] > 0 ? p[k] / ps * std::log((p[k] / ps) / (q[k] / qs)) : INFINITY;
    kl[i] = d;
  }
  return kl;
}

std::vector<double> naive_mse(const std::vector<double>& hist, double max) {
  const size_t nb = hist.size();
  const double w = max / double(nb);
  std::vector<double> err(nb + 1, INFINITY);
  for (size_t i = 1; i <= nb; ++i) {
    const double t = double(i) * w, noise = (t / 127.0) * (t / 127.0) / 12.0;
    double e = 0;
    for (size_t k = 0; k < nb; ++k) {
      const double c = (double(k) + 0.5) * w;
      e += hist[k] * (k < i ? std::min(noise, c * c) : (c - t) * (c - t));
    }
    err[i] = e;
  }
  return err;
}

// Histograms with zero spikes, long tails, empty stretches and far outliers.
std::vector<Histogram> assorted_histograms() {
  std::vector<Histogram> hs;
  hs.push_back(histogram_of(relu_output(200'000, 5)));
  std::mt19937_64 rng(6);
  std::student_t_distribution<double> heavy(2.0);
  std::vector<double> xs(200'000);
  for (double& x : xs) x = heavy(rng);
  hs.push_back(histogram_of(xs));
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (double& x : xs) x = u(rng) < 0.5 ? 0.0 : u(rng) < 0.999 ? u(rng) : 40.0 + u(rng);
  hs.push_back(histogram_of(xs));
  return hs;
}

TEST(CalibrationSearch, EntropyPicksTheTextbookMinimum) {
  for (const Histogram& h : assorted_histograms()) {
    const std::vector<double> kl = naive_kl(h.bins);
    const double best = *std::min_element(kl.begin(), kl.end());
    const size_t chosen = size_t(std::lround(entropy_threshold(h.bins, h.max) / (h.max / kBins)));
    ASSERT_LE(chosen, kBins);
    EXPECT_LE(kl[chosen], best + 1e-9 * std::max(1.0, std::fabs(best))) << "chosen bin " << chosen;
  }
}

TEST(CalibrationSearch, MsePicksTheTextbookMinimum) {
  for (const Histogram& h : assorted_histograms()) {
    const std::vector<double> err = naive_mse(h.bins, h.max);
    const double best = *std::min_element(err.begin(), err.end());
    const size_t chosen = size_t(std::lround(mse_threshold(h.bins, h.max) / (h.max / kBins)));
    ASSERT_LE(chosen, kBins);
    EXPECT_LE(err[chosen], best * (1 + 1e-9)) << "chosen bin " << chosen;
  }
}

// One pass with a growing top against the two-pass histogram over [0, max]: same total, and the
// cumulative counts at every bin edge differ by no more than the values within one fine bin of it.
TEST(GrowingHistogram, MatchesTheTwoPassHistogram) {
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<std::vector<float>> batches;
  for (int b = 0; b < 6; ++b) {  // the maximum grows 1000x across batches, with exact zeros throughout
    std::vector<float> v(20'000);
    for (float& x : v) x = normal(rng) < 0 ? 0.f : float(normal(rng) * std::pow(4.0, b));
    batches.push_back(v);
  }
  GrowingHistogram g;
  std::vector<double> all;
  for (const auto& v : batches) {
    g.add(v.data(), v.size());
    all.insert(all.end(), v.begin(), v.end());
  }
  const Histogram exact = histogram_of(all);
  ASSERT_DOUBLE_EQ(g.max(), exact.max);
  const std::vector<double> got = g.resample(kBins, g.max());
  double total = 0;
  for (double c : got) total += c;
  EXPECT_NEAR(total, double(all.size()), 1e-6 * double(all.size()));
  EXPECT_GE(got[0], exact.bins[0] * 0.999) << "the zeros stay in bin 0";
  std::vector<double> sorted(all);
  for (double& x : sorted) x = std::fabs(x);
  std::sort(sorted.begin(), sorted.end());
  const double fine = std::ldexp(1.0, std::ilogb(exact.max) + 1) / double(GrowingHistogram::kFineBins);
  double cum_got = 0, cum_exact = 0;
  for (size_t b = 0; b < kBins; ++b) {
    cum_got += got[b], cum_exact += exact.bins[b];
    const double edge = double(b + 1) * exact.max / kBins;
    const auto lo = std::lower_bound(sorted.begin(), sorted.end(), edge - fine);
    const auto hi = std::upper_bound(sorted.begin(), sorted.end(), edge + fine);
    EXPECT_LE(std::fabs(cum_got - cum_exact), double(hi - lo) + 1e-6 * double(all.size())) << "edge " << b;
  }
  EXPECT_NEAR(entropy_threshold(got, g.max()), entropy_threshold(exact.bins, exact.max), 0.02 * exact.max);
}

}  // namespace
}  // namespace softdla::builder
