// The TensorRT calibration-cache reader on hostile text (issue 17): bad hex, truncated lines, duplicate
// tensors, NaN scales, binary junk and devices give an Error naming the file and line, never a crash.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "calibrate.h"
#include "error.h"
#include "error_of.h"

namespace softdla::builder {
namespace {

using softdla::testing::error_of;

std::string parse_error(const std::string& text) {
  return error_of([&] { parse_calibration_cache(text, "c.cache"); });
}

TEST(CalibrationCache, ReadsTensorRTCaches) {
  // 0x3c010204 is 1/127; CRLF line ends and a trailing blank line as Windows tools write them.
  const auto s = parse_calibration_cache("TRT-8601-EntropyCalibration2\r\ninput: 3c010204\r\nconv:1: 3D800000\r\n\r\n", "c");
  ASSERT_EQ(s.size(), 2u);
  EXPECT_FLOAT_EQ(s.at("input"), 0.0078740157f);
  EXPECT_EQ(s.at("conv:1"), 0.0625f);  // the name is everything before the last ':'
}

TEST(CalibrationCache, WrittenCachesReadBack) {
  const std::string path = ::testing::TempDir() + "rt.cache";
  write_calibration_cache(path, {{"a", 0.5f}, {"b b", 1e-6f}}, "EntropyCalibration2");
  const auto s = read_calibration_cache(path);
  EXPECT_EQ(s.at("a"), 0.5f);
  EXPECT_EQ(s.at("b b"), 1e-6f);
}

TEST(CalibrationCache, BadLinesNameTheLine) {
  EXPECT_NE(parse_error("").find("not a TensorRT calibration cache"), std::string::npos);
  EXPECT_NE(parse_error("TRX-1\nx: 3c010a14\n").find("not a TensorRT calibration cache"), std::string::npos);
  const std::string h = "TRT-8601-EntropyCalibration2\n";
  EXPECT_NE(parse_error(h + "x: 3c010a1g\n").find("line 2"), std::string::npos);       // bad hex digit
  EXPECT_NE(parse_error(h + "x: 3c010a1\n").find("not 8 hex digits"), std::string::npos);  // truncated
  EXPECT_NE(parse_error(h + "x: 3c010a14ff\n").find("not 8 hex digits"), std::string::npos);
  EXPECT_NE(parse_error(h + "x: +c010a14\n").find("not 8 hex digits"), std::string::npos);
  EXPECT_NE(parse_error(h + "x:\n").find("line 2"), std::string::npos);
  EXPECT_NE(parse_error(h + "x 3c010a14\n").find("expected '<tensor>: <8 hex digits>'"), std::string::npos);
  EXPECT_NE(parse_error(h + ": 3c010a14\n").find("line 2"), std::string::npos);  // no tensor name
  EXPECT_NE(parse_error(h + "x: 7fc00000\n").find("not a finite non-negative"), std::string::npos);  // NaN
  EXPECT_NE(parse_error(h + "x: bf800000\n").find("not a finite non-negative"), std::string::npos);  // -1
  const std::string dup = parse_error(h + "x: 3c010a14\ny: 3c010a14\nx: 3d800000\n");
  EXPECT_NE(dup.find("line 4: tensor 'x' already has a scale on line 2"), std::string::npos) << dup;
}

TEST(CalibrationCache, RandomBytesNeverCrash) {
  std::mt19937 rng(17);
  const std::string alphabet = "TRT-0123456789abcdefABCDEFxyz: \r\n\t\xff";
  for (int i = 0; i < 2000; ++i) {
    std::string text = i % 2 ? "TRT-8601-MinMaxCalibration\n" : "";
    const size_t n = rng() % 200;
    for (size_t k = 0; k < n; ++k) text += i % 3 ? alphabet[rng() % alphabet.size()] : char(rng());
    try {
      parse_calibration_cache(text, "r");
    } catch (const Error&) {
    }
  }
}

TEST(CalibrationCache, DevicesAndHugeFilesAreRefused) {
  EXPECT_NE(error_of([] { read_calibration_cache("/dev/zero"); }).find("not a regular file"), std::string::npos);
  const std::string path = ::testing::TempDir() + "huge.cache";
  {
    std::ofstream f(path);
    f << "TRT-8601-EntropyCalibration2\n";
  }
  std::filesystem::resize_file(path, (uint64_t(64) << 20) + 1);  // sparse: no disk is used
  EXPECT_NE(error_of([&] { read_calibration_cache(path); }).find("limit"), std::string::npos);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace softdla::builder
