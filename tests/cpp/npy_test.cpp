// The .npy/.npz reader on hostile files (issue 17): every size computed from a header is checked
// against the bytes present before anything is allocated, unknown versions and negative dimensions
// are rejected, devices are refused, and each error names the file.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "error.h"
#include "error_of.h"
#include "npy.h"

namespace softdla {
namespace {

// A .npy file's bytes with the given version, header text (padded as NumPy pads it) and data.
std::vector<uint8_t> npy_bytes(const std::string& shape, int major = 1, const std::string& data = "",
                               const std::string& descr = "<f4") {
  std::string h = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  const size_t lead = major == 1 ? 10 : 12;
  while ((lead + h.size() + 1) % 64) h += ' ';
  h += '\n';
  std::string b = "\x93NUMPY";
  b += char(major), b += '\0', b += char(h.size() & 0xff), b += char(h.size() >> 8);
  if (major != 1) b += std::string(2, '\0');
  b += h + data;
  return {b.begin(), b.end()};
}

std::string write_temp(const std::string& name, const std::vector<uint8_t>& bytes) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  return path;
}

using softdla::testing::error_of;

std::string parse_error(const std::vector<uint8_t>& bytes) {
  return error_of([&] { parse_npy(bytes, "in.npy"); });
}

TEST(Npy, ShapesWhoseSizeOverflowsAreErrorsNotCrashes) {
  // Issue 17: these headers with no data crashed softdla run and softdla build --calib-data.
  for (const std::string shape : {"(4611686018427387904,)", "(1073741824, 1073741824, 4)",
                                  "(18446744073709551615, 2)", "(4294967296, 4294967296)"}) {
    const std::string e = parse_error(npy_bytes(shape));
    EXPECT_NE(e.find("'in.npy' is corrupt"), std::string::npos) << shape << ": " << e;
  }
  // A dimension that does not fit 64 bits at all.
  EXPECT_NE(parse_error(npy_bytes("(99999999999999999999999,)")).find("in.npy"), std::string::npos);
  // A size that fits but is not in the file: refused before allocating 4 GB.
  const std::string e = parse_error(npy_bytes("(1000000000,)", 1, "abcd"));
  EXPECT_NE(e.find("holds 4 bytes of data but its shape needs 4000000000"), std::string::npos) << e;
}

TEST(Npy, OnlyVersionsOneTwoAndThree) {
  for (int major : {1, 2, 3}) EXPECT_EQ(parse_error(npy_bytes("(2,)", major, std::string(8, '\0'))), "") << major;
  for (int major : {0, 4, 9, 255}) {
    const std::string e = parse_error(npy_bytes("(2,)", major, std::string(8, '\0')));
    EXPECT_NE(e.find("version " + std::to_string(major) + ".0"), std::string::npos) << e;
  }
  std::vector<uint8_t> minor = npy_bytes("(2,)", 1, std::string(8, '\0'));
  minor[7] = 1;
  EXPECT_NE(parse_error(minor).find("version 1.1"), std::string::npos);
}

TEST(Npy, ShapeMustBeATupleOfWholeNumbers) {
  EXPECT_NE(parse_error(npy_bytes("(1, -3, 4, 4)", 1, std::string(192, '\0'))).find("negative dimension"), std::string::npos);
  for (const std::string shape : {"(a,)", "(1 2)", "(,)", "(1,,2)", "(1.5,)", "(0x10,)"})
    EXPECT_NE(parse_error(npy_bytes(shape, 1, std::string(64, '\0'))), "") << shape;
  // Scalars, 1-tuples, Python 2's long suffix and empty arrays are NumPy's own spellings.
  const NpyArray scalar = parse_npy(npy_bytes("()", 1, std::string(4, '\0')), "s.npy");
  EXPECT_TRUE(scalar.shape.empty());
  EXPECT_EQ(scalar.data.size(), 4u);
  EXPECT_EQ(parse_npy(npy_bytes("(3,)", 1, std::string(12, '\0')), "x").shape, std::vector<uint64_t>{3});
  EXPECT_EQ(parse_npy(npy_bytes("(2L, 3L)", 1, std::string(24, '\0')), "x").shape, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(parse_npy(npy_bytes("(0, 5)"), "x").data.size(), 0u);
}

TEST(Npy, HeaderLengthAndDtypeAreChecked) {
  std::vector<uint8_t> b = npy_bytes("(2,)", 2, std::string(8, '\0'));
  b[8] = b[9] = b[10] = b[11] = 0xff;  // a 4 GB header in a small file
  EXPECT_NE(parse_error(b).find("truncated"), std::string::npos);
  EXPECT_NE(parse_error(npy_bytes("(2,)", 1, std::string(8, '\0'), ">f4")).find("big-endian"), std::string::npos);
  EXPECT_NE(parse_error(npy_bytes("(2,)", 1, std::string(8, '\0'), "<c16")).find("in.npy"), std::string::npos);
  EXPECT_NE(parse_error(npy_bytes("(2,)", 1, std::string(8, '\0'), "<M8")).find("unsupported .npy dtype 'M8'"),
            std::string::npos);
  EXPECT_NE(parse_error({0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0, 0}).find("no 'descr'"), std::string::npos);
}

TEST(Npy, WrittenFilesReadBack) {
  NpyArray a{"f4", {2, 3}, std::vector<uint8_t>(24)};
  for (size_t i = 0; i < 6; ++i) {
    const float v = float(i) - 2.5f;
    std::memcpy(&a.data[i * 4], &v, 4);
  }
  const std::string path = ::testing::TempDir() + "roundtrip.npy";
  write_npy(path, a);
  const NpyArray b = read_npy(path);
  EXPECT_EQ(b.shape, a.shape);
  EXPECT_EQ(b.data, a.data);
  EXPECT_EQ(npy_value(b, 5), 2.5f);
}

TEST(Npy, DevicesAreRefusedBeforeReading) {
  // Reading /dev/zero never ends: it allocated 1 GB and more before failing with std::bad_alloc.
  EXPECT_NE(error_of([] { read_npy("/dev/zero"); }).find("'/dev/zero' is not a regular file"), std::string::npos);
  EXPECT_NE(error_of([] { read_npz("/dev/zero"); }).find("not a regular file"), std::string::npos);
  EXPECT_NE(error_of([] { read_npy(::testing::TempDir()); }).find("a directory"), std::string::npos);
  EXPECT_NE(error_of([] { read_npy("/nonexistent/x.npy"); }).find("cannot open"), std::string::npos);
}

// A stored (uncompressed) zip holding one entry, with its sizes in a zip64 extra field when given.
std::vector<uint8_t> zip_bytes(const std::vector<uint8_t>& entry, uint64_t zip64_usize = 0, uint64_t zip64_csize = 0) {
  std::vector<uint8_t> z;
  const auto put = [&](uint64_t v, int n) {
    for (int k = 0; k < n; ++k) z.push_back(uint8_t(v >> (8 * k)));
  };
  const std::string name = "x.npy";
  const bool z64 = zip64_usize || zip64_csize;
  const uint64_t size32 = z64 ? 0xffffffff : entry.size();
  put(0x04034b50, 4), put(45, 2), put(0, 2), put(0, 2), put(0, 4), put(0, 4), put(size32, 4), put(size32, 4);
  put(name.size(), 2), put(0, 2);
  z.insert(z.end(), name.begin(), name.end());
  z.insert(z.end(), entry.begin(), entry.end());
  const size_t cd = z.size();
  put(0x02014b50, 4), put(45, 2), put(45, 2), put(0, 2), put(0, 2), put(0, 4), put(0, 4), put(size32, 4), put(size32, 4);
  put(name.size(), 2), put(z64 ? 20 : 0, 2), put(0, 2), put(0, 2), put(0, 2), put(0, 4), put(0, 4);
  z.insert(z.end(), name.begin(), name.end());
  if (z64) put(1, 2), put(16, 2), put(zip64_usize, 8), put(zip64_csize, 8);
  const size_t cd_size = z.size() - cd;
  put(0x06054b50, 4), put(0, 2), put(0, 2), put(1, 2), put(1, 2), put(cd_size, 4), put(cd, 4), put(0, 2);
  return z;
}

TEST(Npz, StoredEntriesAreRead) {
  const auto arrays = read_npz(write_temp("ok.npz", zip_bytes(npy_bytes("(2,)", 1, std::string(8, '\0')))));
  ASSERT_EQ(arrays.size(), 1u);
  EXPECT_EQ(arrays[0].first, "x");
  EXPECT_EQ(arrays[0].second.shape, std::vector<uint64_t>{2});
}

TEST(Npz, WrappedZip64SizesAreErrorsNamingTheFile) {
  // Issue 17: a zip64 size near 2^64 wrapped the range check ("cannot create std::vector larger than
  // max_size()").
  const std::vector<uint8_t> entry = npy_bytes("(2,)", 1, std::string(8, '\0'));
  for (const auto& [usize, csize] : std::vector<std::pair<uint64_t, uint64_t>>{
           {~uint64_t(0), ~uint64_t(0) - 15}, {~uint64_t(0) - 15, ~uint64_t(0) - 15}, {uint64_t(1) << 40, uint64_t(1) << 40}}) {
    const std::string path = write_temp("wrap.npz", zip_bytes(entry, usize, csize));
    const std::string e = error_of([&] { read_npz(path); });
    EXPECT_NE(e.find(path), std::string::npos) << e;
    EXPECT_EQ(e.find("max_size"), std::string::npos) << e;
  }
}

TEST(Npz, TruncatedAndCorruptArchives) {
  const std::vector<uint8_t> good = zip_bytes(npy_bytes("(2,)", 1, std::string(8, '\0')));
  for (size_t cut : {size_t(0), size_t(10), size_t(40), good.size() - 30, good.size() - 1}) {
    const std::vector<uint8_t> part(good.begin(), good.begin() + long(cut));
    const std::string path = write_temp("cut.npz", part);
    EXPECT_NE(error_of([&] { read_npz(path); }), "") << cut;
  }
  // Every byte of the directory and end record set to 0xff in turn: an error or a result, never a crash.
  for (size_t k = 0; k < good.size(); ++k) {
    std::vector<uint8_t> bad = good;
    bad[k] = 0xff;
    const std::string path = write_temp("flip.npz", bad);
    try {
      read_npz(path);
    } catch (const Error&) {
    }
  }
}

}  // namespace
}  // namespace softdla
