#include "io_convert.h"

#include <cstring>

namespace softdla {
namespace {

// Calls fn(linear_offset_bytes, formatted_offset_bytes, run_bytes) for runs that are contiguous in
// both forms (whole rows for planar formats, single elements for interleaved ones).
template <class Fn>
void for_each_run(const IoLayout& l, const Shape& s, Fn&& fn) {
  const size_t row = size_t(s[3]) * l.elem;
  const bool planar = l.channels_per_group == 1 && l.group_bytes == l.elem;
  for (uint32_t n = 0; n < s[0]; ++n)
    for (uint32_t c = 0; c < s[1]; ++c)
      for (uint32_t h = 0; h < s[2]; ++h) {
        const size_t lin = ((size_t(n) * s[1] + c) * s[2] + h) * row;
        if (planar) {
          fn(lin, l.offset(n, c, h, 0), row);
        } else {
          for (uint32_t w = 0; w < s[3]; ++w) fn(lin + size_t(w) * l.elem, l.offset(n, c, h, w), l.elem);
        }
      }
}

}  // namespace

void unpack_to_linear(const void* src, const IoLayout& layout, const Shape& shape, void* dst) {
  const uint8_t* in = static_cast<const uint8_t*>(src);
  uint8_t* out = static_cast<uint8_t*>(dst);
  for_each_run(layout, shape, [&](size_t lin, size_t fmt, size_t bytes) { std::memcpy(out + lin, in + fmt, bytes); });
}

void pack_from_linear(const void* src, const Shape& shape, const IoLayout& layout, void* dst) {
  const uint8_t* in = static_cast<const uint8_t*>(src);
  uint8_t* out = static_cast<uint8_t*>(dst);
  std::memset(out, 0, layout.size);
  for_each_run(layout, shape, [&](size_t lin, size_t fmt, size_t bytes) { std::memcpy(out + fmt, in + lin, bytes); });
}

}  // namespace softdla
