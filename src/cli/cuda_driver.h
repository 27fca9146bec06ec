// The few CUDA driver calls `softdla run` and `softdla profile` need when the runtime uses its CUDA
// backend: device memory for the task's buffers (hybrid mode on a GPU takes CUDA device memory, as on a
// Jetson), copies, a stream to submit on, and events that time the tasks on it. The driver is opened with
// dlopen (libcuda.so.1, present wherever a GPU is), as libcudla.so.1 and softdla's Python package do: the
// command links nothing of CUDA and runs unchanged on a machine without a GPU.
//
// Everything works in the primary context of GPU 0, the one the CUDA runtime (and so softdla's CUDA
// backend) uses.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace softdla::cli {

class CudaDriver {
 public:
  // The driver when it loads, initializes and sees a GPU (its primary context made current on this
  // thread); else nullptr with the reason in *why. Asked once per process.
  static CudaDriver* get(std::string* why);

  std::string device_name() const;
  uint64_t alloc(size_t bytes);  // zero-filled device memory (256-byte aligned)
  void free(uint64_t ptr);
  void* create_stream();  // a non-blocking stream (a CUstream, which is a cudaStream_t)
  void destroy_stream(void* stream);
  void copy_to_device(uint64_t dst, const void* src, size_t bytes, void* stream);
  void copy_to_host(void* dst, uint64_t src, size_t bytes, void* stream);
  void synchronize(void* stream);
  void* create_event();
  void destroy_event(void* event);
  void record(void* event, void* stream);
  float elapsed_ms(void* from, void* to);  // both recorded and complete

  struct Api;  // the driver's entry points (cuda_driver.cpp)

 private:
  explicit CudaDriver(const Api* api, int device) : api_(api), device_(device) {}
  void check(int status, const char* what) const;
  const Api* api_;
  int device_;
};

}  // namespace softdla::cli
