// The in-memory form of a loadable: plain structs that the engine executes and the writer serializes.
// Everything the reader hands out has passed the checks in model_checks.cpp, so engine code may rely
// on every index being in range and every size matching its shape.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "hd.h"

namespace softdla {

enum class DataType : uint8_t { kFloat32 = 0, kFloat16 = 1, kInt8 = 2, kInt32 = 3 };
enum class TensorFormat : uint8_t { kLinear = 0, kDlaLinear = 1, kDlaHwc4 = 2, kChw16 = 3, kChw32 = 4 };
enum class Target : uint8_t { kOrin = 0, kXavier = 1 };

size_t element_size(DataType t);
const char* to_string(DataType t);
const char* to_string(TensorFormat f);
const char* to_string(Target t);

using Shape = std::array<uint32_t, 4>;  // N C H W
SOFTDLA_HD inline uint64_t element_count(const Shape& s) {
  return uint64_t(s[0]) * s[1] * s[2] * s[3];
}

struct Constant {
  DataType dtype = DataType::kFloat32;
  std::vector<uint32_t> dims;
  std::vector<uint8_t> data;
  bool operator==(const Constant&) const = default;
};

struct Tensor {
  std::string name;
  Shape shape{1, 1, 1, 1};
  DataType dtype = DataType::kFloat32;
  float scale = 1.0f;
  int32_t constant = -1;  // index into Model::constants, or -1
  bool operator==(const Tensor&) const = default;
};

// Mirrors cudlaModuleTensorDescriptor field by field.
struct TensorDescriptor {
  std::string name;
  uint64_t size = 0;
  uint64_t n = 0, c = 0, h = 0, w = 0;
  uint8_t data_format = 0, data_type = 0, data_category = 0, pixel_format = 0, pixel_mapping = 0;
  std::array<uint32_t, 8> stride{};
  bool operator==(const TensorDescriptor&) const = default;
};

struct IoBinding {
  uint32_t tensor = 0;
  TensorFormat format = TensorFormat::kLinear;
  TensorDescriptor desc;
  bool operator==(const IoBinding&) const = default;
};

enum class SdpKind : uint8_t {
  kBias = 0, kScale = 1, kPRelu = 2, kRelu = 3, kClip = 4,
  kEltAdd = 5, kEltSub = 6, kEltMul = 7, kEltMax = 8, kEltMin = 9,
  kSigmoid = 10, kTanh = 11,
  kEltDiv = 12,
};
const char* to_string(SdpKind k);
SOFTDLA_HD inline bool is_eltwise(SdpKind k) {
  return (k >= SdpKind::kEltAdd && k <= SdpKind::kEltMin) || k == SdpKind::kEltDiv;
}

struct SdpStep {
  SdpKind kind = SdpKind::kRelu;
  std::vector<float> fvalues;
  std::vector<int32_t> ivalues;
  uint8_t shift = 0;
  float lo = 0, hi = 0;
  int32_t lo_i = 0, hi_i = 0;
  int32_t tensor = -1;
  int32_t tensor_multiplier = 1;
  uint8_t tensor_shift = 0;
  bool operator==(const SdpStep&) const = default;
};

struct Requant {
  std::vector<int32_t> multiplier;
  std::vector<uint8_t> shift;
  bool operator==(const Requant&) const = default;
};

enum class ActivationLut : uint8_t { kNone = 0, kSigmoid = 1, kTanh = 2 };

struct SdpParams {
  std::vector<SdpStep> steps;
  Requant requant;
  ActivationLut lut = ActivationLut::kNone;
  float lut_input_scale = 1.0f;
  bool operator==(const SdpParams&) const = default;
};

struct ConvParams {
  uint32_t weights = 0;
  uint32_t stride_h = 1, stride_w = 1;
  uint32_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  uint32_t dilation_h = 1, dilation_w = 1;
  uint32_t groups = 1;
  SdpParams post;
  bool operator==(const ConvParams&) const = default;
};

struct DeconvParams {
  uint32_t weights = 0;
  uint32_t stride_h = 1, stride_w = 1;
  SdpParams post;
  bool operator==(const DeconvParams&) const = default;
};

enum class PoolKind : uint8_t { kMax = 0, kAverage = 1 };
struct PoolParams {
  PoolKind kind = PoolKind::kMax;
  uint32_t kernel_h = 1, kernel_w = 1;
  uint32_t stride_h = 1, stride_w = 1;
  uint32_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  bool exclude_padding = false;
  bool operator==(const PoolParams&) const = default;
};

struct LrnParams {
  uint32_t size = 5;
  float alpha = 1e-4f, beta = 0.75f, bias = 1.0f;
  bool operator==(const LrnParams&) const = default;
};

enum class ResizeMode : uint8_t { kNearest = 0, kBilinear = 1 };
enum class NearestRounding : uint8_t { kAsymmetricFloor = 0, kHalfPixelRoundDown = 1, kHalfPixelRoundUp = 2 };
struct ResizeParams {
  ResizeMode mode = ResizeMode::kNearest;
  uint32_t scale_h = 1, scale_w = 1;
  NearestRounding nearest = NearestRounding::kAsymmetricFloor;
  bool operator==(const ResizeParams&) const = default;
};

struct ConcatParams { bool operator==(const ConcatParams&) const = default; };
struct SliceParams {
  Shape start{0, 0, 0, 0};
  bool operator==(const SliceParams&) const = default;
};
struct ShuffleParams {
  std::array<uint32_t, 4> perm{0, 1, 2, 3};
  bool operator==(const ShuffleParams&) const = default;
};
struct SoftmaxParams {
  uint32_t axis = 1;
  bool operator==(const SoftmaxParams&) const = default;
};
enum class UnaryKind : uint8_t { kAbs = 0 };
struct UnaryParams {
  UnaryKind kind = UnaryKind::kAbs;
  bool operator==(const UnaryParams&) const = default;
};
struct ReduceMaxParams {
  std::vector<uint32_t> axes;
  bool operator==(const ReduceMaxParams&) const = default;
};
struct ConvertParams { bool operator==(const ConvertParams&) const = default; };

using OpParams = std::variant<ConvParams, DeconvParams, SdpParams, PoolParams, LrnParams,
                              ResizeParams, ConcatParams, SliceParams, ShuffleParams,
                              SoftmaxParams, UnaryParams, ReduceMaxParams, ConvertParams>;
const char* op_kind_name(const OpParams& p);

struct Op {
  std::string name;
  std::vector<uint32_t> inputs;
  std::vector<uint32_t> outputs;
  OpParams params;
  bool operator==(const Op&) const = default;
};

struct MemoryPlan {
  std::vector<uint64_t> offsets;  // one per tensor; meaningful for intermediates only
  uint64_t arena_size = 0;
  bool operator==(const MemoryPlan&) const = default;
};

struct BuildInfo {
  std::string builder, source_model_sha256, precisions, flags;
  bool operator==(const BuildInfo&) const = default;
};

struct Version {
  uint16_t major = 0, minor = 0, patch = 0;
  bool operator==(const Version&) const = default;
};

struct Model {
  Version version;
  Target target = Target::kOrin;
  std::vector<Tensor> tensors;
  std::vector<Constant> constants;
  std::vector<IoBinding> inputs;
  std::vector<IoBinding> outputs;
  std::vector<Op> ops;
  MemoryPlan memory_plan;
  BuildInfo build_info;
  bool operator==(const Model&) const = default;
};

}  // namespace softdla
