// What every CUDA op kernel provides, and the small CUDA helpers they share.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "model.h"

namespace softdla::gpu {

// Throws std::runtime_error naming the call when a CUDA runtime call fails.
void check(cudaError_t status, const char* what);
void check_lt(cublasStatus_t status, const char* what);
#define SOFTDLA_CUDA(call) ::softdla::gpu::check((call), #call)
#define SOFTDLA_LT(call) ::softdla::gpu::check_lt((call), #call)

// Owned device memory.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes);
  DeviceBuffer(const void* host, size_t bytes);  // uploads a copy
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = nullptr, o.bytes_ = 0; }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return ptr_; }
  template <class T> T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

template <class T>
DeviceBuffer upload(const std::vector<T>& v) { return DeviceBuffer(v.data(), v.size() * sizeof(T)); }

// Shared by the ops of one module.
struct OpContext {
  cublasLtHandle_t lt = nullptr;
  void* workspace = nullptr;  // cuBLASLt workspace
  size_t workspace_bytes = 0;
  std::vector<uint8_t> channels_last;  // per tensor: 1 when stored NHWC (channels_last.h)
};

struct GpuOpIo {
  std::vector<const void*> inputs;  // one per Op::inputs entry (constants: device copies)
  void* output = nullptr;
  void* scratch = nullptr;          // scratch_bytes() of device memory, private to this launch sequence
  std::vector<const void*> fused_inputs;  // the inputs of the next op, when fuse_next() took it
};

class GpuOp {
 public:
  virtual ~GpuOp() = default;
  virtual size_t scratch_bytes() const { return 0; }
  // Takes over `next` (the following op, whose input `input` is this op's output, read by nothing else):
  // this op's kernels then compute next's output, and next is not run. False when it cannot.
  virtual bool fuse_next(const Model&, const Op& /*next*/, size_t /*input*/, const OpContext&) { return false; }
  // Launches the op's kernels on `stream` (no synchronization, capturable into a CUDA graph).
  virtual void enqueue(const GpuOpIo& io, const OpContext& ctx, cudaStream_t stream) const = 0;
};

// The kernel for model.ops[op_index] (weights converted and uploaded).
std::unique_ptr<GpuOp> make_gpu_op(const Model& m, size_t op_index, const OpContext& ctx);

std::unique_ptr<GpuOp> make_gpu_conv(const Model& m, const Op& op, const ConvParams& p, const OpContext& ctx);
std::unique_ptr<GpuOp> make_gpu_deconv(const Model& m, const Op& op, const DeconvParams& p, const OpContext& ctx);
std::unique_ptr<GpuOp> make_gpu_sdp(const Model& m, const Op& op, const SdpParams& p, const OpContext& ctx);
std::unique_ptr<GpuOp> make_gpu_pool(const Model& m, const Op& op, const PoolParams& p, const OpContext& ctx);
std::unique_ptr<GpuOp> make_gpu_lrn(const Model& m, const Op& op, const LrnParams& p, const OpContext& ctx);
std::unique_ptr<GpuOp> make_gpu_resize(const Model& m, const Op& op, const ResizeParams& p, const OpContext& ctx);
std::unique_ptr<GpuOp> make_gpu_softmax(const Model& m, const Op& op, const SoftmaxParams& p, const OpContext& ctx);
std::unique_ptr<GpuOp> make_gpu_data_movement(const Model& m, const Op& op);  // concat, slice, shuffle
std::unique_ptr<GpuOp> make_gpu_pointwise(const Model& m, const Op& op);      // abs, reduce max, convert

// INT8 convolutions sum products of at most 2^14 in magnitude: int32 sums are exact below 2^17 terms.
inline constexpr uint64_t kMaxExactTerms = uint64_t(1) << 17;

// Grid for a grid-stride loop over `count` items.
inline unsigned blocks_for(uint64_t count, unsigned threads = 256) {
  const uint64_t b = (count + threads - 1) / threads;
  return unsigned(b < 1 ? 1 : (b > 65535u * 8 ? 65535u * 8 : b));
}
inline constexpr unsigned kThreads = 256;

// Checks the launch that was just made (bad configurations fail at launch, not later).
inline void check_launch(const char* kernel) { check(cudaGetLastError(), kernel); }

}  // namespace softdla::gpu
