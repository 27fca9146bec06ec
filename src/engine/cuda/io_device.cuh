// I/O format conversion on the device: the bindings' formats (docs/FORMATS.md) <-> dense NCHW.
#pragma once
#include <cuda_runtime.h>

#include "io_layout.h"

namespace softdla::gpu {

void enqueue_unpack(const void* src, const IoLayout& layout, const Shape& shape, void* dst, cudaStream_t stream);
// Padding bytes of the formatted buffer are written as zero.
void enqueue_pack(const void* src, const Shape& shape, const IoLayout& layout, void* dst, cudaStream_t stream);

}  // namespace softdla::gpu
