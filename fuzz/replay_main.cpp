// Replays fuzz inputs without libFuzzer: every file named on the command line, or found in a directory
// named there, goes once through the target's LLVMFuzzerTestOneInput. This is how the regression inputs
// (fuzz/regressions/<target>/) and seed corpora run under CTest in every tree, gcc or clang, sanitized
// or not. A defect shows as a crash or a sanitizer report; the exit status is 0 otherwise.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv);
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace fs = std::filesystem;

static void replay(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::fprintf(stderr, "replay %s (%zu bytes)\n", file.c_str(), bytes.size());
  // A copy of exactly the input's size, so reads past the end are caught as libFuzzer would catch them.
  std::vector<uint8_t> exact(bytes);
  (void)LLVMFuzzerTestOneInput(exact.empty() ? nullptr : exact.data(), exact.size());
}

int main(int argc, char** argv) {
  (void)LLVMFuzzerInitialize(&argc, &argv);
  size_t count = 0;
  for (int i = 1; i < argc; ++i) {
    const fs::path p(argv[i]);
    if (fs::is_directory(p)) {
      std::vector<fs::path> files;
      for (const auto& e : fs::directory_iterator(p))
        if (e.is_regular_file()) files.push_back(e.path());
      std::sort(files.begin(), files.end());
      for (const auto& f : files) replay(f), ++count;
    } else if (fs::exists(p)) {
      replay(p), ++count;
    } else {
      std::fprintf(stderr, "replay: %s does not exist\n", argv[i]);
      return 2;
    }
  }
  std::fprintf(stderr, "replayed %zu inputs without a defect\n", count);
  return 0;
}
