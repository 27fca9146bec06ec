#include "device_elem.cuh"
#include "gpu_ops.h"
#include "io_device.cuh"

namespace softdla::gpu {
namespace {

template <class E>
__global__ void unpack_kernel(const uint8_t* __restrict src, E* __restrict dst, IoLayout layout, Shape shape) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < element_count(shape);
       i += uint64_t(gridDim.x) * blockDim.x) {
    const Nchw e = unflatten(i, shape);
    dst[i] = *reinterpret_cast<const E*>(src + layout.offset(e.n, e.c, e.h, e.w));
  }
}

template <class E>
__global__ void pack_kernel(const E* __restrict src, uint8_t* __restrict dst, IoLayout layout, Shape shape) {
  for (uint64_t i = blockIdx.x * uint64_t(blockDim.x) + threadIdx.x; i < element_count(shape);
       i += uint64_t(gridDim.x) * blockDim.x) {
    const Nchw e = unflatten(i, shape);
    *reinterpret_cast<E*>(dst + layout.offset(e.n, e.c, e.h, e.w)) = src[i];
  }
}

}  // namespace

void enqueue_unpack(const void* src, const IoLayout& layout, const Shape& shape, void* dst, cudaStream_t stream) {
  by_element_size(layout.elem, [&](auto* tag) {
    using E = std::remove_pointer_t<decltype(tag)>;
    unpack_kernel<E><<<blocks_for(element_count(shape)), kThreads, 0, stream>>>(static_cast<const uint8_t*>(src),
                                                                                static_cast<E*>(dst), layout, shape);
  });
  check_launch("unpack_kernel");
}

void enqueue_pack(const void* src, const Shape& shape, const IoLayout& layout, void* dst, cudaStream_t stream) {
  SOFTDLA_CUDA(cudaMemsetAsync(dst, 0, layout.size, stream));
  by_element_size(layout.elem, [&](auto* tag) {
    using E = std::remove_pointer_t<decltype(tag)>;
    pack_kernel<E><<<blocks_for(element_count(shape)), kThreads, 0, stream>>>(static_cast<const E*>(src),
                                                                              static_cast<uint8_t*>(dst), layout, shape);
  });
  check_launch("pack_kernel");
}

}  // namespace softdla::gpu
