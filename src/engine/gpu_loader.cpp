// Finds and loads libsoftdla_cuda.so: where SOFTDLA_CUDA_PLUGIN points; else next to the object this code
// is linked into (libcudla.so.1, libsoftdla_engine_c.so, a Python extension, or the executable, e.g. the
// softdla command); else by its bare name, which dlopen looks up along the caller's RUNPATH (an installed
// bin/softdla has $ORIGIN/../lib), LD_LIBRARY_PATH and the system's directories. A machine without the
// plugin, the CUDA driver or a GPU simply gets no platform, and everything runs on the CPU.
//
// The driver is asked first, directly (dlopen of libcuda.so.1, no link): the plugin maps the CUDA runtime
// and cuBLASLt, ~150 MB of resident memory per process, which a machine with the CUDA toolkit but no
// driver or no GPU would pay for nothing.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "gpu_backend.h"
#include "log.h"

namespace softdla::gpu {
namespace {

struct Loaded {
  Platform* platform = nullptr;
  std::string why;
};

std::string plugin_path() {
  if (const char* env = std::getenv("SOFTDLA_CUDA_PLUGIN"); env && *env) return env;
  std::string self;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&plugin_path), &info) && info.dli_fname) self = info.dli_fname;
  // In an executable dladdr names argv[0], which has no directory when the program was found on PATH.
  if (self.find('/') == std::string::npos) {
    char exe[4096];
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    self = n > 0 ? std::string(exe, static_cast<size_t>(n)) : std::string();
  }
  if (const size_t slash = self.rfind('/'); slash != std::string::npos) {
    std::string next_to_self = self.substr(0, slash + 1) + "libsoftdla_cuda.so";
    if (access(next_to_self.c_str(), F_OK) == 0) return next_to_self;
  }
  return "libsoftdla_cuda.so";
}

// Whether the CUDA driver is installed and sees at least one device; else why not.
bool driver_has_device(std::string* why) {
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!cuda) {
    *why = "no CUDA driver (libcuda.so.1 not found): install the NVIDIA driver to use a GPU";
    return false;
  }
  // The driver API's C types (CUresult is an int enum); these two calls are stable since CUDA 2.0.
  using InitFn = int (*)(unsigned int);
  using CountFn = int (*)(int*);
  const auto init = reinterpret_cast<InitFn>(dlsym(cuda, "cuInit"));
  const auto count = reinterpret_cast<CountFn>(dlsym(cuda, "cuDeviceGetCount"));
  if (!init || !count) {
    dlclose(cuda);
    *why = "libcuda.so.1 lacks cuInit/cuDeviceGetCount: it is not a CUDA driver";
    return false;
  }
  // From here the library stays loaded even on failure: cuInit may leave driver state behind, and
  // unloading the driver under it is riskier than the few pages it keeps.
  if (const int rc = init(0); rc != 0) {
    *why = "the CUDA driver found no usable GPU (cuInit error " + std::to_string(rc) + ")";
    return false;
  }
  int devices = 0;
  if (const int rc = count(&devices); rc != 0 || devices <= 0) {
    *why = rc ? "the CUDA driver cannot count GPUs (cuDeviceGetCount error " + std::to_string(rc) + ")"
              : std::string("the CUDA driver sees no GPU");
    return false;
  }
  return true;
}

Loaded load() {
  Loaded r;
  if (!driver_has_device(&r.why)) return r;
  const std::string path = plugin_path();
  // RTLD_LOCAL keeps the plugin's CUDA symbols out of the caller's namespace.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* e = dlerror();
    r.why = "CUDA backend plugin not loaded (" + std::string(e ? e : path) + ")";
    return r;
  }
  auto create = reinterpret_cast<CreatePlatformFn>(dlsym(handle, kCreatePlatformSymbol));
  if (!create) {
    r.why = path + " has no " + kCreatePlatformSymbol + "; rebuild softdla";
    return r;
  }
  r.platform = create(kGpuAbi, &r.why);  // the handle stays open for the life of the process
  return r;
}

const Loaded& loaded() {
  static const Loaded l = [] {
    Loaded x = load();
    if (x.platform) log(LogLevel::kInfo, "CUDA backend available: ", x.platform->describe());
    else log(LogLevel::kInfo, "CUDA backend unavailable: ", x.why);
    return x;
  }();
  return l;
}

}  // namespace

Platform* platform() { return loaded().platform; }
const std::string& unavailable_reason() { return loaded().why; }

Choice choose_backend(std::string* why) {
  const char* env = std::getenv("SOFTDLA_BACKEND");
  const std::string want = env ? env : "auto";
  if (want == "cpu") return Choice::kCpu;
  if (want != "auto" && want != "cuda" && want != "")
    log(LogLevel::kWarn, "SOFTDLA_BACKEND='", want, "' is not auto, cpu or cuda; using auto");
  if (platform()) return Choice::kCuda;
  if (want == "cuda") {
    if (why) *why = unavailable_reason();
    return Choice::kCudaMissing;
  }
  return Choice::kCpu;
}

}  // namespace softdla::gpu
