// Conversion between the linear NCHW form the kernels use and an I/O binding's memory format.
#pragma once
#include "io_layout.h"

namespace softdla {

// Reads a tensor stored in `layout` into dense NCHW.
void unpack_to_linear(const void* src, const IoLayout& layout, const Shape& shape, void* dst);
// Writes dense NCHW into `layout`; padding bytes are written as zero.
void pack_from_linear(const void* src, const Shape& shape, const IoLayout& layout, void* dst);

}  // namespace softdla
