#include <stdexcept>
#include <string>

#include "gpu_ops.h"

namespace softdla::gpu {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw std::runtime_error(std::string("CUDA error ") + cudaGetErrorName(status) + " (" +
                             cudaGetErrorString(status) + ") in " + what);
}

void check_lt(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuBLASLt error ") + std::to_string(int(status)) + " in " + what);
}

DeviceBuffer::DeviceBuffer(size_t bytes) : bytes_(bytes) {
  if (bytes) SOFTDLA_CUDA(cudaMalloc(&ptr_, bytes));
}

DeviceBuffer::DeviceBuffer(const void* host, size_t bytes) : DeviceBuffer(bytes) {
  if (bytes) SOFTDLA_CUDA(cudaMemcpy(ptr_, host, bytes, cudaMemcpyHostToDevice));
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_) cudaFree(ptr_);
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    if (ptr_) cudaFree(ptr_);
    ptr_ = o.ptr_, bytes_ = o.bytes_;
    o.ptr_ = nullptr, o.bytes_ = 0;
  }
  return *this;
}

std::unique_ptr<GpuOp> make_gpu_op(const Model& m, size_t op_index, const OpContext& ctx) {
  const Op& op = m.ops[op_index];
  return std::visit(
      [&](const auto& p) -> std::unique_ptr<GpuOp> {
        using P = std::decay_t<decltype(p)>;
        if constexpr (std::is_same_v<P, ConvParams>) return make_gpu_conv(m, op, p, ctx);
        else if constexpr (std::is_same_v<P, DeconvParams>) return make_gpu_deconv(m, op, p, ctx);
        else if constexpr (std::is_same_v<P, SdpParams>) return make_gpu_sdp(m, op, p, ctx);
        else if constexpr (std::is_same_v<P, PoolParams>) return make_gpu_pool(m, op, p, ctx);
        else if constexpr (std::is_same_v<P, LrnParams>) return make_gpu_lrn(m, op, p, ctx);
        else if constexpr (std::is_same_v<P, ResizeParams>) return make_gpu_resize(m, op, p, ctx);
        else if constexpr (std::is_same_v<P, SoftmaxParams>) return make_gpu_softmax(m, op, p, ctx);
        else if constexpr (std::is_same_v<P, ConcatParams> || std::is_same_v<P, SliceParams> ||
                           std::is_same_v<P, ShuffleParams>)
          return make_gpu_data_movement(m, op);
        else return make_gpu_pointwise(m, op);
      },
      op.params);
}

}  // namespace softdla::gpu
