#include "io_layout.h"

#include <algorithm>

#include "error.h"

namespace softdla {

namespace {
uint64_t round_up(uint64_t x, uint64_t m) { return (x + m - 1) / m * m; }
}  // namespace

size_t element_size(DataType t) {
  switch (t) {
    case DataType::kFloat32: return 4;
    case DataType::kFloat16: return 2;
    case DataType::kInt8: return 1;
    case DataType::kInt32: return 4;
  }
  return 0;
}

const char* to_string(DataType t) {
  switch (t) {
    case DataType::kFloat32: return "fp32";
    case DataType::kFloat16: return "fp16";
    case DataType::kInt8: return "int8";
    case DataType::kInt32: return "int32";
  }
  return "?";
}

const char* to_string(TensorFormat f) {
  switch (f) {
    case TensorFormat::kLinear: return "linear";
    case TensorFormat::kDlaLinear: return "dla_linear";
    case TensorFormat::kDlaHwc4: return "dla_hwc4";
    case TensorFormat::kChw16: return "chw16";
    case TensorFormat::kChw32: return "chw32";
  }
  return "?";
}

const char* to_string(Target t) { return t == Target::kXavier ? "xavier" : "orin"; }

uint32_t hwc4_line_alignment(Target target) { return target == Target::kXavier ? 32 : 64; }

IoLayout io_layout(const Shape& s, DataType dtype, TensorFormat format, Target target) {
  const uint32_t n = s[0], c = s[1], h = s[2], w = s[3];
  if (dtype != DataType::kFloat32 && dtype != DataType::kFloat16 && dtype != DataType::kInt8)
    fail("I/O tensors must be fp32, fp16 or int8, not ", to_string(dtype));
  if (dtype == DataType::kFloat32 && format != TensorFormat::kLinear)
    fail("fp32 I/O is only allowed in the linear format (it is not a DLA precision)");
  IoLayout l;
  l.elem = uint32_t(element_size(dtype));
  switch (format) {
    case TensorFormat::kLinear:
      l.group_bytes = l.elem;
      l.line_stride = uint64_t(w) * l.elem;
      l.surface_stride = l.line_stride * h;
      l.batch_stride = l.surface_stride * c;
      break;
    case TensorFormat::kDlaLinear:
      l.group_bytes = l.elem;
      l.line_stride = round_up(uint64_t(w) * l.elem, kDlaLinearLineAlignment);
      l.surface_stride = l.line_stride * h;
      l.batch_stride = l.surface_stride * c;
      break;
    case TensorFormat::kDlaHwc4: {
      if (c != 1 && c != 3 && c != 4)
        fail("dla_hwc4 holds 1, 3 or 4 channels; this tensor has C = ", c,
             " (use dla_linear or chw16/chw32 instead)");
      l.channels_per_group = c == 1 ? 1 : 4;
      l.group_bytes = l.channels_per_group * l.elem;
      l.line_stride = round_up(uint64_t(w) * l.group_bytes, hwc4_line_alignment(target));
      l.surface_stride = l.line_stride * h;
      l.batch_stride = l.surface_stride;
      break;
    }
    case TensorFormat::kChw16:
    case TensorFormat::kChw32: {
      const bool is16 = format == TensorFormat::kChw16;
      if (is16 && dtype != DataType::kFloat16) fail("chw16 is an fp16 format; use chw32 for int8");
      if (!is16 && dtype != DataType::kInt8) fail("chw32 is an int8 format; use chw16 for fp16");
      l.channels_per_group = is16 ? 16 : 32;
      l.group_bytes = 32;  // one 32-byte atom per pixel
      l.line_stride = uint64_t(w) * 32;
      l.surface_stride = l.line_stride * h;
      l.batch_stride = l.surface_stride * ((c + l.channels_per_group - 1) / l.channels_per_group);
      break;
    }
    default:
      fail("unknown tensor format ", int(format));
  }
  l.size = l.batch_stride * n;
  return l;
}

std::string descriptor_name(const std::string& name) {
  if (name.size() <= kDescriptorNameMaxBytes) return name;
  size_t end = kDescriptorNameMaxBytes;
  // Bytes 10xxxxxx continue a character: step back to the byte that starts the one the limit falls in.
  while (end > 0 && (static_cast<unsigned char>(name[end]) & 0xC0) == 0x80) --end;
  return name.substr(0, end);
}

TensorDescriptor io_descriptor(const std::string& name, const Shape& s, DataType dtype,
                               TensorFormat format, Target target) {
  using namespace cudla_const;
  const IoLayout l = io_layout(s, dtype, format, target);
  TensorDescriptor d;
  d.name = descriptor_name(name);
  d.size = l.size;
  d.n = s[0], d.c = s[1], d.h = s[2], d.w = s[3];
  d.data_type = dtype == DataType::kInt8 ? kTypeInt8 : dtype == DataType::kFloat16 ? kTypeHalf : kTypeFloat;
  d.pixel_mapping = kPitchLinear;
  switch (format) {
    case TensorFormat::kLinear:
    case TensorFormat::kDlaLinear:
      d.data_format = kFormatNchw;
      d.data_category = kCategoryFeature;
      d.pixel_format = kPixelFeature;
      break;
    case TensorFormat::kDlaHwc4:
      d.data_format = kFormatNhwc;
      d.data_category = kCategoryImage;
      if (dtype == DataType::kInt8) d.pixel_format = s[1] == 1 ? kPixelR8 : kPixelA8B8G8R8;
      else d.pixel_format = s[1] == 1 ? kPixelR16F : kPixelA16B16G16R16F;
      break;
    case TensorFormat::kChw16:
    case TensorFormat::kChw32:
      d.data_format = kFormatNCxHWx;
      d.data_category = kCategoryFeature;
      d.pixel_format = kPixelFeature;
      break;
  }
  d.stride[0] = l.group_bytes;
  d.stride[1] = uint32_t(l.line_stride);
  d.stride[2] = uint32_t(l.surface_stride);
  d.stride[3] = uint32_t(l.batch_stride);
  return d;
}

}  // namespace softdla
