// FP32 lowered model -> the deployable model: each op in FP16 or INT8, Convert ops where precision
// changes, integer rescale parameters for INT8 (docs/NUMERICS.md), and the requested I/O formats.
#pragma once
#include <string>
#include <vector>

#include "io_formats.h"
#include "lower.h"

namespace softdla::builder {

struct PrecisionPlan {
  std::vector<DataType> op_precision;  // per op of the FP32 model: kFloat32, kFloat16 or kInt8
  std::vector<float> amax;             // per tensor |range| (INT8 scale = amax / 127); <= 0: unknown
  std::vector<IoFormat> inputs, outputs;
};

// Whether the DLA can run this FP32-model op in INT8 (LRN and softmax run in FP16 only, ...).
bool supports_int8(const Op& op);

// Whether an INT8 average pool of the FP32 model is built as a depthwise convolution instead of a PDP
// pool. The PDP keeps the input's scale (an average is often a fraction of its input's range, so its
// output would waste most of the int8 codes) and divides with two rounded Q16 reciprocals (biased: a
// 2x2 window summing to 4k+1 gives k+1); a depthwise convolution with equal weights has its own output
// scale and one rounding. Not with exclude_padding (a convolution counts the padding) or beyond the
// convolution's channel limit.
bool int8_average_as_convolution(const Op& op, const Model& fp32);

// Tensors that must share one INT8 scale (the DLA forces equal ranges): concat inputs and output,
// pooling/resize/slice/shuffle in and out, the inputs of an element-wise op. Returns a group id per
// tensor (equal ids share a scale). `precision` (per op, may be empty): INT8 average pools that
// int8_average_as_convolution turns into convolutions keep their own ranges.
std::vector<uint32_t> shared_range_groups(const Model& fp32, const std::vector<DataType>& precision = {});

Model apply_precision(const Lowered& lowered, const PrecisionPlan& plan);

// The rules a loadable's I/O names follow, as the build enforces them (the loadable binds each by name): no
// output that is also an input, no name twice, no two alike in the first bytes cuDLA's descriptors keep.
// Fails with the build's message; `check` reports it as the graph's row.
void check_io_names(const std::vector<std::string>& inputs, const std::vector<std::string>& outputs);

// rescale factor r -> (multiplier, shift) with multiplier in [2^30, 2^31) when r allows, shift <= 62.
std::pair<int32_t, uint8_t> quant_multiplier(double r);

}  // namespace softdla::builder
