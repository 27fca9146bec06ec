// Fuzz target: bytes as a TensorRT calibration cache, read alone and then used for an INT8 build of
// the bundled digits model (so scales of every kind — zero, negative, NaN, huge — reach the builder).
// Contract: a clean softdla::Error or a loadable that verifies, never a crash.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "builder.h"
#include "calibrate.h"
#include "error.h"
#include "file_bytes.h"
#include "fuzz_limits.h"
#include "loadable.h"

namespace {

std::vector<uint8_t> g_digits;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  softdla::fuzz::quiet_environment();
  g_digits = softdla::read_file_bytes(SOFTDLA_SOURCE_DIR "/examples/models/digits.onnx", "ONNX model", softdla::kMaxModelFileBytes);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = "/tmp/softdla-fuzz-" + std::to_string(getpid()) + ".cache";
  if (FILE* f = std::fopen(path.c_str(), "wb")) {
    if (size) std::fwrite(data, 1, size, f);
    std::fclose(f);
  }
  bool readable = false;
  try {
    (void)softdla::builder::read_calibration_cache(path);
    readable = true;
  } catch (const softdla::Error&) {
  }
  if (readable) {
    softdla::builder::BuildOptions o;
    o.int8 = true;
    o.fp16 = true;
    o.calib_cache = path;
    try {
      const auto r = softdla::builder::build(g_digits, o);
      (void)softdla::read_loadable(r.loadable);  // what the builder writes must verify
    } catch (const softdla::Error&) {
    }
  }
  std::remove(path.c_str());
  return 0;
}
