// CudaDriver: libcuda.so.1 through dlopen (cuda_driver.h says why). The driver API's C types are spelt
// out here (CUresult and CUdevice are ints, CUdeviceptr a 64-bit integer, contexts, streams and events
// opaque pointers); every entry point used has kept its name and signature since CUDA 4.
#include "cuda_driver.h"

#include <dlfcn.h>


#include "error.h"

namespace softdla::cli {

struct CudaDriver::Api {
  int (*init)(unsigned);
  int (*device_count)(int*);
  int (*device_get)(int*, int);
  int (*device_name)(char*, int, int);
  int (*primary_ctx_retain)(void**, int);
  int (*ctx_set_current)(void*);
  int (*mem_alloc)(uint64_t*, size_t);
  int (*mem_free)(uint64_t);
  int (*memset_d8)(uint64_t, unsigned char, size_t);
  int (*copy_htod)(uint64_t, const void*, size_t, void*);
  int (*copy_dtoh)(void*, uint64_t, size_t, void*);
  int (*stream_create)(void**, unsigned);
  int (*stream_destroy)(void*);
  int (*stream_sync)(void*);
  int (*event_create)(void**, unsigned);
  int (*event_destroy)(void*);
  int (*event_record)(void*, void*);
  int (*event_elapsed)(float*, void*, void*);
  int (*error_string)(int, const char**);
};

namespace {

constexpr unsigned kStreamNonBlocking = 1;  // CU_STREAM_NON_BLOCKING: no implicit sync with stream 0

template <class F>
bool find(void* lib, const char* name, F& fn) {
  fn = reinterpret_cast<F>(dlsym(lib, name));
  return fn != nullptr;
}

struct Opened {
  CudaDriver::Api api{};
  void* context = nullptr;
  int device = 0;
  std::string why;  // empty: usable
};

Opened open_driver() {
  Opened o;
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    o.why = "no CUDA driver (libcuda.so.1 not found)";
    return o;
  }
  CudaDriver::Api& a = o.api;
  const bool all = find(lib, "cuInit", a.init) && find(lib, "cuDeviceGetCount", a.device_count) &&
                   find(lib, "cuDeviceGet", a.device_get) && find(lib, "cuDeviceGetName", a.device_name) &&
                   find(lib, "cuDevicePrimaryCtxRetain", a.primary_ctx_retain) &&
                   find(lib, "cuCtxSetCurrent", a.ctx_set_current) && find(lib, "cuMemAlloc_v2", a.mem_alloc) &&
                   find(lib, "cuMemFree_v2", a.mem_free) && find(lib, "cuMemsetD8_v2", a.memset_d8) &&
                   find(lib, "cuMemcpyHtoDAsync_v2", a.copy_htod) && find(lib, "cuMemcpyDtoHAsync_v2", a.copy_dtoh) &&
                   find(lib, "cuStreamCreate", a.stream_create) && find(lib, "cuStreamDestroy_v2", a.stream_destroy) &&
                   find(lib, "cuStreamSynchronize", a.stream_sync) && find(lib, "cuEventCreate", a.event_create) &&
                   find(lib, "cuEventDestroy_v2", a.event_destroy) && find(lib, "cuEventRecord", a.event_record) &&
                   find(lib, "cuEventElapsedTime", a.event_elapsed) && find(lib, "cuGetErrorString", a.error_string);
  // The library stays loaded from here on, usable or not (libcudla.so.1 holds it open too).
  if (!all) {
    o.why = "libcuda.so.1 lacks entry points of the CUDA driver API";
    return o;
  }
  if (const int rc = a.init(0); rc != 0) {
    o.why = "the CUDA driver found no usable GPU (cuInit error " + std::to_string(rc) + ")";
    return o;
  }
  int count = 0;
  if (const int rc = a.device_count(&count); rc != 0 || count <= 0) {
    o.why = rc ? "the CUDA driver cannot count GPUs (error " + std::to_string(rc) + ")" : "the CUDA driver sees no GPU";
    return o;
  }
  if (const int rc = a.device_get(&o.device, 0); rc != 0) {
    o.why = "cuDeviceGet(0) failed (error " + std::to_string(rc) + ")";
    return o;
  }
  if (const int rc = a.primary_ctx_retain(&o.context, o.device); rc != 0) {
    o.why = "the primary context of GPU 0 cannot be made (error " + std::to_string(rc) + ")";
    return o;
  }
  return o;
}

}  // namespace

CudaDriver* CudaDriver::get(std::string* why) {
  static const Opened opened = open_driver();
  static CudaDriver driver(&opened.api, opened.device);
  if (!opened.why.empty()) {
    if (why) *why = opened.why;
    return nullptr;
  }
  // The calling thread works in the primary context (the command uses one thread).
  driver.check(opened.api.ctx_set_current(opened.context), "cuCtxSetCurrent");
  return &driver;
}

void CudaDriver::check(int status, const char* what) const {
  if (status == 0) return;
  const char* text = nullptr;
  api_->error_string(status, &text);
  fail(what, " failed: CUDA error ", status, " (", text ? text : "unknown", ")");
}

std::string CudaDriver::device_name() const {
  char name[256] = {};
  if (api_->device_name(name, int(sizeof name - 1), device_) != 0) return "GPU 0";
  return name;
}

uint64_t CudaDriver::alloc(size_t bytes) {
  uint64_t ptr = 0;
  check(api_->mem_alloc(&ptr, bytes ? bytes : 1), "cuMemAlloc");
  check(api_->memset_d8(ptr, 0, bytes ? bytes : 1), "cuMemsetD8");
  return ptr;
}

void CudaDriver::free(uint64_t ptr) {
  if (ptr) api_->mem_free(ptr);
}

void* CudaDriver::create_stream() {
  void* s = nullptr;
  check(api_->stream_create(&s, kStreamNonBlocking), "cuStreamCreate");
  return s;
}

void CudaDriver::destroy_stream(void* stream) {
  if (stream) api_->stream_destroy(stream);
}

void CudaDriver::copy_to_device(uint64_t dst, const void* src, size_t bytes, void* stream) {
  check(api_->copy_htod(dst, src, bytes, stream), "cuMemcpyHtoDAsync");
}

void CudaDriver::copy_to_host(void* dst, uint64_t src, size_t bytes, void* stream) {
  check(api_->copy_dtoh(dst, src, bytes, stream), "cuMemcpyDtoHAsync");
}

void CudaDriver::synchronize(void* stream) { check(api_->stream_sync(stream), "cuStreamSynchronize"); }

void* CudaDriver::create_event() {
  void* e = nullptr;
  check(api_->event_create(&e, 0), "cuEventCreate");  // default flags: timing enabled
  return e;
}

void CudaDriver::destroy_event(void* event) {
  if (event) api_->event_destroy(event);
}

void CudaDriver::record(void* event, void* stream) { check(api_->event_record(event, stream), "cuEventRecord"); }

float CudaDriver::elapsed_ms(void* from, void* to) {
  float ms = 0;
  check(api_->event_elapsed(&ms, from, to), "cuEventElapsedTime");
  return ms;
}

}  // namespace softdla::cli
