#include "npy.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <regex>

#include "error.h"

namespace softdla {

static size_t dtype_size(const std::string& d) {
  if (d == "f4") return 4;
  if (d == "f2") return 2;
  if (d == "i1" || d == "u1") return 1;
  fail("unsupported .npy dtype '", d, "' (use float32, float16, int8 or uint8)");
}

NpyArray read_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot open '", path, "'");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (bytes.size() < 10 || std::memcmp(bytes.data(), "\x93NUMPY", 6) != 0) fail("'", path, "' is not a .npy file");
  const int major = bytes[6];
  size_t header_len, start;
  if (major == 1) {
    header_len = bytes[8] | (size_t(bytes[9]) << 8);
    start = 10;
  } else {
    if (bytes.size() < 12) fail("'", path, "' is truncated");
    header_len = bytes[8] | (size_t(bytes[9]) << 8) | (size_t(bytes[10]) << 16) | (size_t(bytes[11]) << 24);
    start = 12;
  }
  if (start + header_len > bytes.size()) fail("'", path, "' is truncated");
  const std::string header(bytes.begin() + long(start), bytes.begin() + long(start + header_len));
  std::smatch m;
  if (!std::regex_search(header, m, std::regex("'descr':\\s*'([<|=])([a-z][0-9])'")))
    fail("'", path, "': cannot read dtype (big-endian arrays are not supported)");
  NpyArray a;
  a.dtype = m[2];
  if (header.find("'fortran_order': True") != std::string::npos) fail("'", path, "': Fortran order not supported");
  if (!std::regex_search(header, m, std::regex("'shape':\\s*\\(([^)]*)\\)"))) fail("'", path, "': no shape");
  const std::string dims = m[1];
  uint64_t count = 1;
  const std::regex number("[0-9]+");
  for (std::sregex_iterator it(dims.begin(), dims.end(), number), end; it != end; ++it) {
    a.shape.push_back(std::stoull(it->str()));
    count *= a.shape.back();
  }
  const size_t bytes_needed = count * dtype_size(a.dtype);
  if (bytes.size() - start - header_len < bytes_needed) fail("'", path, "' holds fewer bytes than its shape needs");
  a.data.assign(bytes.begin() + long(start + header_len), bytes.begin() + long(start + header_len + bytes_needed));
  return a;
}

void write_npy(const std::string& path, const NpyArray& a) {
  std::string shape;
  for (uint64_t d : a.shape) shape += std::to_string(d) + ", ";
  if (a.shape.size() > 1) shape.resize(shape.size() - 2);
  else if (a.shape.size() == 1) shape.resize(shape.size() - 1);
  std::string header = "{'descr': '" + std::string(a.dtype == "i1" || a.dtype == "u1" ? "|" : "<") + a.dtype +
                       "', 'fortran_order': False, 'shape': (" + shape + "), }";
  while ((10 + header.size() + 1) % 64) header += ' ';
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  if (!f) fail("cannot write '", path, "'");
  const uint8_t lead[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, uint8_t(header.size() & 0xff), uint8_t(header.size() >> 8)};
  f.write(reinterpret_cast<const char*>(lead), 10);
  f.write(header.data(), std::streamsize(header.size()));
  f.write(reinterpret_cast<const char*>(a.data.data()), std::streamsize(a.data.size()));
  if (!f) fail("failed writing '", path, "'");
}

}  // namespace softdla
