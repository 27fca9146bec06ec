// Byte layout of a tensor in each DLA I/O format, and the cudlaModuleTensorDescriptor cuDLA reports
// for it. The rules are in docs/FORMATS.md; this file is their single implementation.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "hd.h"
#include "model.h"

namespace softdla {

// cuDLA descriptor constants (cudla.h CUDLA_DATA_FORMAT_*, CUDLA_DATA_TYPE_*, ...).
namespace cudla_const {
inline constexpr uint8_t kFormatNchw = 1, kFormatNhwc = 2, kFormatNCxHWx = 3;
inline constexpr uint8_t kTypeFloat = 1, kTypeHalf = 2, kTypeInt8 = 4;
inline constexpr uint8_t kCategoryImage = 0, kCategoryFeature = 2;
inline constexpr uint8_t kPixelR8 = 0, kPixelR16F = 5, kPixelA16B16G16R16F = 8, kPixelA8B8G8R8 = 12,
                         kPixelFeature = 36;
inline constexpr uint8_t kPitchLinear = 0;
}  // namespace cudla_const

struct IoLayout {
  uint64_t size = 0;          // bytes, padding included
  uint32_t elem = 0;          // bytes per element
  uint32_t channels_per_group = 1;  // C elements stored together (1 for planar formats)
  uint32_t group_bytes = 0;   // stride[0]: bytes from one W position to the next
  uint64_t line_stride = 0;   // stride[1]: bytes from one row (H) to the next
  uint64_t surface_stride = 0;  // stride[2]: bytes from one channel group (or plane) to the next
  uint64_t batch_stride = 0;  // stride[3]: bytes from one image (N) to the next
  // Byte offset of element (n, c, h, w).
  SOFTDLA_HD uint64_t offset(uint32_t n, uint32_t c, uint32_t h, uint32_t w) const {
    return n * batch_stride + (c / channels_per_group) * surface_stride + h * line_stride +
           uint64_t(w) * group_bytes + uint64_t(c % channels_per_group) * elem;
  }
};

// Row-stride alignment of a dla_hwc4 image on the target (64 B on Orin, 32 B on Xavier). dla_linear rows
// are 64 B aligned on every DLA (TensorRT's kDLA_LINEAR: "rounded up to 64 bytes").
uint32_t hwc4_line_alignment(Target target);
inline constexpr uint32_t kDlaLinearLineAlignment = 64;

// Throws Error when the combination is not a DLA format (e.g. chw16 with int8, hwc4 with C = 5).
IoLayout io_layout(const Shape& shape, DataType dtype, TensorFormat format, Target target);

// cuDLA's descriptors hold a name of at most CUDLA_RUNTIME_TENSOR_DESC_NAME_MAX_LEN (80) bytes.
inline constexpr size_t kDescriptorNameMaxBytes = 80;

// The name as a descriptor holds it: its first kDescriptorNameMaxBytes bytes, shortened further so that a
// UTF-8 character is never cut in two (a name is shown to users, and half a character is not valid text).
std::string descriptor_name(const std::string& name);

// The descriptor cuDLA reports for a tensor bound with this format (its name cut by descriptor_name).
TensorDescriptor io_descriptor(const std::string& name, const Shape& shape, DataType dtype,
                               TensorFormat format, Target target);

}  // namespace softdla
