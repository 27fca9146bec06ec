// Fuzz target: ONNX model bytes through the whole builder — `check` (the per-node capability table)
// and an FP16 `build` — and, when the build succeeds, the loadable through the runtime (load + one
// task). Contract: a clean softdla::Error or a loadable that verifies and runs, never a crash, a
// sanitizer report or a hang. Built with onnx_mutator.cpp for structure-aware mutation.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "builder.h"
#include "cudla.h"
#include "error.h"
#include "fuzz_run.h"
#include "loadable.h"

namespace {
cudlaDevHandle g_device = nullptr;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  g_device = softdla::fuzz::open_device();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<uint8_t> onnx(data, data + size);
  try {
    (void)softdla::builder::check(onnx, softdla::Target::kOrin);
  } catch (const softdla::Error&) {
  }
  std::vector<uint8_t> loadable;
  try {
    softdla::builder::BuildOptions o;
    o.fp16 = true;
    loadable = softdla::builder::build(onnx, o).loadable;
  } catch (const softdla::Error&) {
    return 0;
  }
  cudlaModule module = nullptr;
  // What the builder writes must load: a failure here is a builder defect.
  if (cudlaModuleLoadFromMemory(g_device, loadable.data(), loadable.size(), &module, 0) != cudlaSuccess) std::abort();
  if (softdla::fuzz::task_work(loadable) <= softdla::fuzz::kMaxTaskWork) softdla::fuzz::run_module(g_device, module);
  if (cudlaModuleUnload(module, 0) != cudlaSuccess) std::abort();
  return 0;
}
