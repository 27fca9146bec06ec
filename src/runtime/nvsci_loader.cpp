// Opens libnvscibuf.so.1 and libnvscisync.so.1 once per process: the copies the program already
// loaded, else those next to libcudla.so.1 (softdla's own, in a build or install tree), else whatever
// the dynamic linker finds (LD_LIBRARY_PATH).
#include "nvsci_loader.h"

#include <dlfcn.h>

#include <mutex>

namespace softdla::rt {
namespace {

std::string own_directory() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&own_directory), &info) || !info.dli_fname) return {};
  std::string path = info.dli_fname;
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
}

void* open_library(const char* name, std::string* why) {
  // A copy the program already loaded comes first: handles are only known to the copy that made them.
  if (void* h = dlopen(name, RTLD_NOW | RTLD_NOLOAD)) return h;
  const std::string beside = own_directory() + name;
  if (void* h = dlopen(beside.c_str(), RTLD_NOW)) return h;
  if (void* h = dlopen(name, RTLD_NOW)) return h;
  const char* err = dlerror();
  *why = std::string("cannot load ") + name + ": " + (err ? err : "not found");
  return nullptr;
}

struct Loaded {
  NvSciApi api{};
  bool ok = false;
  std::string why;
};

template <typename F>
bool bind(void* lib, const char* symbol, F* out, std::string* why) {
  *out = reinterpret_cast<F>(dlsym(lib, symbol));
  if (!*out) *why = std::string("NvSci library lacks ") + symbol;
  return *out != nullptr;
}

Loaded load() {
  Loaded l;
  void* buf = open_library("libnvscibuf.so.1", &l.why);
  void* sync = buf ? open_library("libnvscisync.so.1", &l.why) : nullptr;
  if (!buf || !sync) return l;
  NvSciApi& a = l.api;
  std::string* w = &l.why;
  l.ok = bind(buf, "softdlaNvSciBufObjGetMemory", &a.buf_get_memory, w) &&
         bind(buf, "NvSciBufObjDup", &a.buf_obj_dup, w) && bind(buf, "NvSciBufObjFree", &a.buf_obj_free, w) &&
         bind(buf, "NvSciBufObjGetAttrList", &a.buf_obj_get_attr_list, w) &&
         bind(buf, "NvSciBufAttrListGetAttrs", &a.buf_attr_get, w) &&
         bind(sync, "NvSciSyncAttrListSetAttrs", &a.sync_attr_set, w) &&
         bind(sync, "NvSciSyncObjDup", &a.sync_obj_dup, w) && bind(sync, "NvSciSyncObjFree", &a.sync_obj_free, w) &&
         bind(sync, "NvSciSyncObjGenerateFence", &a.sync_generate_fence, w) &&
         bind(sync, "NvSciSyncObjSignal", &a.sync_signal, w) && bind(sync, "NvSciSyncFenceDup", &a.sync_fence_dup, w) &&
         bind(sync, "NvSciSyncFenceWait", &a.sync_fence_wait, w);
  if (!l.ok) return l;
  NvSciError (*module_open)(NvSciSyncModule*) = nullptr;
  NvSciError (*context_alloc)(NvSciSyncModule, NvSciSyncCpuWaitContext*) = nullptr;
  NvSciSyncModule module = nullptr;
  l.ok = bind(sync, "NvSciSyncModuleOpen", &module_open, w) &&
         bind(sync, "NvSciSyncCpuWaitContextAlloc", &context_alloc, w) && module_open(&module) == NvSciError_Success &&
         context_alloc(module, &a.wait_context) == NvSciError_Success;
  if (!l.ok && l.why.empty()) l.why = "could not make an NvSciSync CPU wait context";
  return l;  // the libraries, module and context stay for the life of the process
}

}  // namespace

const NvSciApi* nvsci(std::string* why) {
  static const Loaded loaded = load();
  if (!loaded.ok) {
    if (why) *why = loaded.why;
    return nullptr;
  }
  return &loaded.api;
}

}  // namespace softdla::rt
