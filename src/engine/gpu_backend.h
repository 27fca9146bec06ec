// The boundary between the engine and the CUDA plugin (libsoftdla_cuda.so), a shared object of its own so
// that nothing here needs CUDA to load. Users of the engine do not call it directly: they go through
// backend.h, whose CUDA backend (cuda_backend.cpp) wraps a Module and whose CPU backend uses StreamOps
// to run in CUDA stream order. The runtime asks the Platform only about CUDA objects it is handed
// (pointers, streams). Both sides are built from one source tree by one compiler; kGpuAbi guards
// against mixing builds.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "model.h"

namespace softdla::gpu {

inline constexpr int kGpuAbi = 5;

enum class MemoryKind { kHost, kDevice };

// One loadable prepared on the GPU: weights uploaded, kernels chosen, scratch allocated.
class Module {
 public:
  virtual ~Module() = default;
  // Enqueues one task on `stream` (a cudaStream_t; nullptr is the legacy default stream) and returns
  // without waiting. inputs/outputs are device pointers in the bindings' formats. `statistics`, when
  // not null, is device memory that receives the layer-wise statistics record (docs/RUNTIME.md).
  // Tasks of one module run one after another whatever streams they are enqueued on.
  // Throws std::runtime_error when the work cannot be enqueued.
  virtual void enqueue(const void* const* inputs, void* const* outputs, void* statistics, uint64_t task_index,
                       void* stream) = 0;
  // The first asynchronous failure of an earlier task, if any (empty string: none seen).
  virtual std::string poll_error() = 0;
};

// What the CPU backend needs of the CUDA device to run tasks in stream order, and nothing more.
class StreamOps {
 public:
  virtual ~StreamOps() = default;
  virtual void* alloc_pinned(size_t bytes) = 0;
  virtual void free_pinned(void* p) = 0;
  virtual void copy_async(void* dst, const void* src, size_t bytes, void* stream) = 0;
  // Calls fn(data) on a host thread once the stream's earlier work is done; later work waits for it.
  // fn must not call CUDA.
  virtual void host_call(void* stream, void (*fn)(void*), void* data) = 0;
  // Fails `stream` as a faulting DLA fails it on a Jetson: enqueues a kernel that, when `flag` is null
  // or the pinned word it points to is non-zero once the stream reaches it, runs for a few
  // milliseconds (a task's time before its fault) and then traps. The stream and every later CUDA call
  // of the process report cudaErrorLaunchFailure (a sticky error, as cudaErrorExternalDevice is).
  virtual void fail_stream(void* stream, const volatile uint32_t* flag) = 0;
  // False once a sticky error (a trap, a fault) has made this process's CUDA context unusable.
  virtual bool context_usable() = 0;
};

// The CUDA device.
class Platform : public StreamOps {
 public:
  virtual std::string describe() const = 0;
  // Device memory (cudaMalloc, managed) or not. Throws on a pointer CUDA rejects.
  virtual MemoryKind memory_kind(const void* p) = 0;
  // Whether `stream` is being captured into a CUDA graph. Throws on an invalid stream.
  virtual bool capturing(void* stream) = 0;
  virtual std::unique_ptr<Module> load(const Model& model) = 0;

  virtual void* alloc_device(size_t bytes) = 0;
  virtual void free_device(void* p) = 0;
  virtual void synchronize(void* stream) = 0;
};

// The plugin's one exported symbol: nullptr (and a reason in `why`) when no usable GPU is present.
using CreatePlatformFn = Platform* (*)(int abi, std::string* why);
inline constexpr const char* kCreatePlatformSymbol = "softdla_gpu_create_platform";

// The process-wide platform, or nullptr when the plugin or a GPU is missing (the reason is logged
// once at info level and returned by unavailable_reason()). Thread-safe; loaded on first use.
Platform* platform();
const std::string& unavailable_reason();

// Which backend new work should use, from SOFTDLA_BACKEND (auto | cpu | cuda; read at each call).
enum class Choice { kCpu, kCuda, kCudaMissing };
Choice choose_backend(std::string* why);

}  // namespace softdla::gpu
