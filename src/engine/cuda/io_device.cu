#include "device_elem.cuh"
#include "gpu_ops.h"
#include "io_device.cuh"

namespace softdla::gpu {
namespace {

// One thread per pixel and channel group: the group's channels are adjacent in the DLA format, so one
// thread reads them from one sector (for an RGB image in chw32, 3 of its 32 bytes) and writes one
// element of each channel plane; consecutive threads take consecutive pixels.
template <class E, class Index>
__global__ void unpack_kernel(const uint8_t* __restrict src, E* __restrict dst, IoLayout layout, Shape shape) {
  const uint32_t C = shape[1], cpg = layout.channels_per_group, groups = (C + cpg - 1) / cpg;
  const Shape pixels{shape[0], groups, shape[2], shape[3]};  // (n, group, h, w)
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < element_count(pixels);
       i += uint64_t(gridDim.x) * blockDim.x) {
    const Nchw e = unflatten<Index>(i, pixels);
    const uint32_t c0 = e.c * cpg, count = min(cpg, C - c0);
    const uint8_t* from = src + layout.offset(e.n, c0, e.h, e.w);
    E* to = dst + ((uint64_t(e.n) * C + c0) * shape[2] + e.h) * shape[3] + e.w;
    const uint64_t plane = uint64_t(shape[2]) * shape[3];
    for (uint32_t k = 0; k < count; ++k) to[k * plane] = *reinterpret_cast<const E*>(from + k * layout.elem);
  }
}

template <class E, class Index>
__global__ void pack_kernel(const E* __restrict src, uint8_t* __restrict dst, IoLayout layout, Shape shape) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < element_count(shape);
       i += uint64_t(gridDim.x) * blockDim.x) {
    const Nchw e = unflatten<Index>(i, shape);
    *reinterpret_cast<E*>(dst + layout.offset(e.n, e.c, e.h, e.w)) = src[i];
  }
}

}  // namespace

void enqueue_unpack(const void* src, const IoLayout& layout, const Shape& shape, void* dst, cudaStream_t stream) {
  const bool small = element_count(shape) < (uint64_t(1) << 32);
  by_element_size(layout.elem, [&](auto* tag) {
    using E = std::remove_pointer_t<decltype(tag)>;
    auto* kernel = small ? unpack_kernel<E, uint32_t> : unpack_kernel<E, uint64_t>;
    const uint64_t pixels = element_count(shape) / shape[1] * ((shape[1] + layout.channels_per_group - 1) / layout.channels_per_group);
    kernel<<<blocks_for(pixels), kThreads, 0, stream>>>(static_cast<const uint8_t*>(src),
                                                                      static_cast<E*>(dst), layout, shape);
  });
  check_launch("unpack_kernel");
}

void enqueue_pack(const void* src, const Shape& shape, const IoLayout& layout, void* dst, cudaStream_t stream) {
  SOFTDLA_CUDA(cudaMemsetAsync(dst, 0, layout.size, stream));
  const bool small = element_count(shape) < (uint64_t(1) << 32);
  by_element_size(layout.elem, [&](auto* tag) {
    using E = std::remove_pointer_t<decltype(tag)>;
    auto* kernel = small ? pack_kernel<E, uint32_t> : pack_kernel<E, uint64_t>;
    kernel<<<blocks_for(element_count(shape)), kThreads, 0, stream>>>(static_cast<const E*>(src),
                                                                      static_cast<uint8_t*>(dst), layout, shape);
  });
  check_launch("pack_kernel");
}

}  // namespace softdla::gpu
