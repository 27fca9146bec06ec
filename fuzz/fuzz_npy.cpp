// Fuzz target: bytes as a .npy file, then as a .npz archive, through the readers `softdla run` and
// `softdla build --calib-data` use. Contract: a clean softdla::Error or a tensor, never a crash or an
// allocation the file cannot back.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "error.h"
#include "fuzz_limits.h"
#include "npy.h"

namespace {

// The .npz reader takes a path; each run writes its input to one private file.
std::string scratch_path(const char* ext) {
  return "/tmp/softdla-fuzz-" + std::to_string(getpid()) + ext;
}

void write_file(const std::string& path, const uint8_t* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return;
  if (size) std::fwrite(data, 1, size, f);
  std::fclose(f);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  softdla::fuzz::quiet_environment();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const softdla::NpyArray a = softdla::parse_npy(std::vector<uint8_t>(data, data + size), "fuzz input");
    // Every element the header promises must be readable: a parser that accepts a shape its data
    // cannot back shows up here as an out-of-bounds read.
    uint64_t count = 1;
    for (const uint64_t d : a.shape) count *= d;
    volatile float sink = 0;
    for (uint64_t i = 0; i < count && i < 4096; ++i) sink = sink + softdla::npy_value(a, size_t(i));
    for (uint64_t i = count > 4096 ? count - 16 : count; i < count; ++i) sink = sink + softdla::npy_value(a, size_t(i));
  } catch (const softdla::Error&) {
  }
  const std::string path = scratch_path(".npz");
  write_file(path, data, size);
  try {
    (void)softdla::read_npz(path);
  } catch (const softdla::Error&) {
  }
  std::remove(path.c_str());
  return 0;
}
