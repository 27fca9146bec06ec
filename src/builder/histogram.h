// A histogram of |x| that needs no first pass for the maximum: calibration runs the FP32 model once
// over the samples instead of twice (once for the maxima, once for histograms over [0, max]).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace softdla::builder {

// Counts over [0, 2^e) in kFineBins equal bins. A value beyond the top doubles the top (enough times):
// bins merge in pairs, so every count stays in a bin that holds exactly its old one. At the end,
// resample() spreads the counts over the bins the rules want, [0, max] in 2048 bins: each target bin
// then spans at least kFineBins / 2048 / 2 = 4 fine bins, and only the mass of the fine bin cut by a
// target edge is split (in proportion to the overlap, as if spread evenly inside it).
class GrowingHistogram {
 public:
  static constexpr size_t kFineBins = 16384;

  void add(const float* v, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; ++i)
      if (std::isfinite(v[i])) m = std::max(m, double(std::fabs(v[i])));
    if (m <= 0) {  // zeros (or non-finite values only): counted in bin 0 without fixing a scale
      for (size_t i = 0; i < n; ++i) zeros_ += std::isfinite(v[i]) ? 1 : 0;
      return;
    }
    max_ = std::max(max_, m);
    grow_to(m);
    const double scale = double(kFineBins) / top_;
    for (size_t i = 0; i < n; ++i)
      if (std::isfinite(v[i])) counts_[std::min(kFineBins - 1, size_t(std::fabs(v[i]) * scale))] += 1;
  }

  double max() const { return max_; }

  // The counts in `bins` equal bins over [0, top], top >= max() (a bin's share beyond top goes to the
  // last bin; there is none when top >= max()).
  std::vector<double> resample(size_t bins, double top) const {
    std::vector<double> out(bins, 0.0);
    if (bins == 0) return out;
    out[0] += zeros_;
    if (counts_.empty() || top <= 0) {
      for (double c : counts_) out[0] += c;
      return out;
    }
    const double fine = top_ / double(kFineBins), per_target = double(bins) / top;
    for (size_t i = 0; i < counts_.size(); ++i) {
      if (counts_[i] == 0) continue;
      const double lo = double(i) * fine * per_target, hi = double(i + 1) * fine * per_target;  // in target bins
      for (size_t b = size_t(lo); double(b) < hi; ++b) {
        const double overlap = std::min(hi, double(b + 1)) - std::max(lo, double(b));
        out[std::min(b, bins - 1)] += counts_[i] * overlap / (hi - lo);
      }
    }
    return out;
  }

 private:
  void grow_to(double m) {
    if (counts_.empty()) {
      counts_.assign(kFineBins, 0.0);
      top_ = std::ldexp(1.0, std::ilogb(m) + 1);  // the power of two just above m
      counts_[0] += zeros_;
      zeros_ = 0;
      return;
    }
    int doublings = 0;
    while (top_ <= m) top_ *= 2, ++doublings;
    if (doublings == 0) return;
    const size_t group = doublings >= 14 ? kFineBins : size_t(1) << doublings;
    for (size_t j = 0; j < kFineBins; ++j) {
      double sum = 0;
      if (j * group < kFineBins)
        for (size_t k = j * group; k < (j + 1) * group && k < kFineBins; ++k) sum += counts_[k];
      counts_[j] = sum;
    }
  }

  std::vector<double> counts_;  // empty until the first non-zero value
  double top_ = 0, max_ = 0, zeros_ = 0;
};

}  // namespace softdla::builder
