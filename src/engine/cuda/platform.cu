// libsoftdla_cuda.so's entry point: the CUDA device the runtime talks to (pointer kinds, stream
// capture state, pinned staging and host callbacks for the CPU backend, module loading).
#include <cstring>
#include <string>

#include "gpu_backend.h"
#include "gpu_module.h"
#include "gpu_ops.h"

namespace softdla::gpu {
namespace {

constexpr uint64_t kFaultDelayNs = 5'000'000;  // the failing task's time before its fault

__global__ void fail_stream_kernel(const volatile uint32_t* flag) {
  if (flag && *flag == 0) return;
  uint64_t start = 0, now = 0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    __nanosleep(100'000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < kFaultDelayNs);
  __trap();
}

class CudaPlatform final : public Platform {
 public:
  explicit CudaPlatform(int device) : device_(device) {
    cudaDeviceProp prop{};
    SOFTDLA_CUDA(cudaGetDeviceProperties(&prop, device));
    int runtime = 0, driver = 0;
    cudaRuntimeGetVersion(&runtime);
    cudaDriverGetVersion(&driver);
    description_ = std::string(prop.name) + " (device " + std::to_string(device) + ", sm_" +
                   std::to_string(prop.major) + std::to_string(prop.minor) + ", " + std::to_string(prop.multiProcessorCount) +
                   " SMs, CUDA runtime " + std::to_string(runtime) + ", driver " + std::to_string(driver) + ")";
  }

  std::string describe() const override { return description_; }

  MemoryKind memory_kind(const void* p) override {
    cudaPointerAttributes attr{};
    SOFTDLA_CUDA(cudaPointerGetAttributes(&attr, p));
    return attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged ? MemoryKind::kDevice
                                                                                   : MemoryKind::kHost;
  }

  bool capturing(void* stream) override {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    SOFTDLA_CUDA(cudaStreamIsCapturing(static_cast<cudaStream_t>(stream), &status));
    return status != cudaStreamCaptureStatusNone;
  }

  std::unique_ptr<Module> load(const Model& model) override {
    SOFTDLA_CUDA(cudaSetDevice(device_));
    return load_module(model);
  }

  void* alloc_device(size_t bytes) override {
    void* p = nullptr;
    SOFTDLA_CUDA(cudaMalloc(&p, bytes ? bytes : 1));
    return p;
  }
  void free_device(void* p) override { cudaFree(p); }

  void* alloc_pinned(size_t bytes) override {
    void* p = nullptr;
    SOFTDLA_CUDA(cudaMallocHost(&p, bytes ? bytes : 1));
    return p;
  }
  void free_pinned(void* p) override { cudaFreeHost(p); }

  void copy_async(void* dst, const void* src, size_t bytes, void* stream) override {
    SOFTDLA_CUDA(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, static_cast<cudaStream_t>(stream)));
  }

  void host_call(void* stream, void (*fn)(void*), void* data) override {
    SOFTDLA_CUDA(cudaLaunchHostFunc(static_cast<cudaStream_t>(stream), fn, data));
  }

  void synchronize(void* stream) override { SOFTDLA_CUDA(cudaStreamSynchronize(static_cast<cudaStream_t>(stream))); }

  void fail_stream(void* stream, const volatile uint32_t* flag) override {
    fail_stream_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(flag);
    SOFTDLA_CUDA(cudaGetLastError());
  }

  bool context_usable() override {
    // Sticky errors are returned by every call, so a query on an empty stream of our own tells.
    cudaStream_t probe = nullptr;
    if (cudaStreamCreateWithFlags(&probe, cudaStreamNonBlocking) != cudaSuccess) return false;
    const cudaError_t e = cudaStreamQuery(probe);
    cudaStreamDestroy(probe);
    return e == cudaSuccess;
  }

 private:
  int device_;
  std::string description_;
};

}  // namespace
}  // namespace softdla::gpu

extern "C" __attribute__((visibility("default"))) softdla::gpu::Platform* softdla_gpu_create_platform(int abi,
                                                                                                      std::string* why) {
  using namespace softdla::gpu;
  if (abi != kGpuAbi) {
    if (why) *why = "libsoftdla_cuda.so is from another softdla build (ABI " + std::to_string(kGpuAbi) + ", caller " +
                    std::to_string(abi) + ")";
    return nullptr;
  }
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    if (why) *why = e != cudaSuccess ? std::string("no usable CUDA driver/GPU (") + cudaGetErrorName(e) + ")" : "no CUDA GPU";
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return nullptr;
  }
  int device = 0;
  cudaGetDevice(&device);
  try {
    static CudaPlatform platform(device);  // lives as long as the process
    return &platform;
  } catch (const std::exception& ex) {
    if (why) *why = ex.what();
    return nullptr;
  }
}
