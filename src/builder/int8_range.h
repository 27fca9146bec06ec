// INT8 ranges and scales: the DLA quantizes symmetrically with 127 levels per side, so a tensor's INT8
// scale is its |range| (amax) / 127. The one place the builder converts between the two (calibration
// caches and Q/DQ nodes speak scales, calibration and shared-range groups speak ranges).
#pragma once

namespace softdla::builder {

constexpr double kInt8Levels = 127.0;
constexpr double scale_from_amax(double amax) { return amax / kInt8Levels; }
constexpr double amax_from_scale(double scale) { return scale * kInt8Levels; }

}  // namespace softdla::builder
