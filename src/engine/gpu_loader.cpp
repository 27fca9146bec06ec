// Finds and loads libsoftdla_cuda.so: next to the shared object this code is linked into (libcudla.so.1,
// libsoftdla_engine_c.so, a Python extension), or where SOFTDLA_CUDA_PLUGIN points. A machine without
// the plugin, the CUDA driver or a GPU simply gets no platform, and everything runs on the CPU.
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <mutex>

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
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&plugin_path), &info) && info.dli_fname) {
    std::string self = info.dli_fname;
    const size_t slash = self.rfind('/');
    if (slash != std::string::npos) return self.substr(0, slash + 1) + "libsoftdla_cuda.so";
  }
  return "libsoftdla_cuda.so";
}

Loaded load() {
  Loaded r;
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
