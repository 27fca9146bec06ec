// Fuzz target: loadable bytes -> cudlaModuleLoadFromMemory -> (if it loads) one synchronous task on
// registered host buffers sized from the module's own descriptors. The contract under test: a loadable
// either fails to load with a clean status or runs without a crash, a sanitizer report or a hang.
#include <cstdint>
#include <cstdlib>

#include "cudla.h"
#include "fuzz_run.h"

namespace {
cudlaDevHandle g_device = nullptr;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_device = softdla::fuzz::open_device();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cudlaModule module = nullptr;
  if (cudlaModuleLoadFromMemory(g_device, data, size, &module, 0) != cudlaSuccess) return 0;
  if (softdla::fuzz::task_work({data, size}) <= softdla::fuzz::kMaxTaskWork) softdla::fuzz::run_module(g_device, module);
  if (cudlaModuleUnload(module, 0) != cudlaSuccess) std::abort();  // a loaded module must unload
  return 0;
}
