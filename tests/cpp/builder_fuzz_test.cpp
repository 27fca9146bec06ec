// Corrupted ONNX models (truncations and random byte flips of the bundled digits model) must give a
// clean softdla::Error or a valid loadable, never a crash; meant for the ASan/UBSan build too.
#include <gtest/gtest.h>

#include <random>

#include "builder.h"
#include "error.h"
#include "file_bytes.h"
#include "loadable.h"

namespace softdla::builder {
namespace {

std::vector<uint8_t> digits() { return read_file_bytes(std::string(SOFTDLA_SOURCE_DIR) + "/examples/models/digits.onnx", "ONNX model", kMaxModelFileBytes); }

BuildOptions fp16() {
  BuildOptions o;
  o.fp16 = true;
  return o;
}

TEST(BuilderFuzz, ValidModelBuilds) {
  const BuildResult r = build(digits(), fp16());
  EXPECT_NO_THROW(read_loadable(r.loadable));
}

TEST(BuilderFuzz, TruncationsAreRejected) {
  const auto bytes = digits();
  for (size_t len = 0; len < bytes.size(); len += 97) {
    const std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + long(len));
    EXPECT_THROW(build(cut, fp16()), Error) << len;
  }
}

TEST(BuilderFuzz, RandomByteFlipsNeverCrash) {
  const auto bytes = digits();
  std::mt19937 rng(7);
  int rejected = 0, built = 0;
  for (int i = 0; i < 1500; ++i) {
    std::vector<uint8_t> b = bytes;
    for (int f = 0; f < 1 + int(rng() % 3); ++f) b[rng() % b.size()] = uint8_t(rng());
    try {
      const BuildResult r = build(b, fp16());
      EXPECT_NO_THROW(read_loadable(r.loadable));
      ++built;
    } catch (const Error&) {
      ++rejected;
    }
  }
  EXPECT_EQ(rejected + built, 1500);
}

TEST(BuilderFuzz, CheckNeverCrashes) {
  const auto bytes = digits();
  std::mt19937 rng(11);
  for (int i = 0; i < 300; ++i) {
    std::vector<uint8_t> b = bytes;
    b[rng() % b.size()] = uint8_t(rng());
    try {
      check(b, Target::kOrin);
    } catch (const Error&) {
    }
  }
}

}  // namespace
}  // namespace softdla::builder
