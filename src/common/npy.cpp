#include "npy.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <regex>

#include "error.h"

namespace softdla {

static size_t dtype_size(const std::string& d) {
  if (d == "f4") return 4;
  if (d == "f8") return 8;
  if (d == "f2") return 2;
  if (d == "i1" || d == "u1") return 1;
  fail("unsupported .npy dtype '", d, "' (use float32, float16, int8 or uint8)");
}

namespace {
std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot open '", path, "'");
  return {(std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>()};
}
uint64_t le(const std::vector<uint8_t>& b, size_t at, int n) {
  if (at + size_t(n) > b.size()) fail("truncated zip structure");
  uint64_t v = 0;
  for (int k = n - 1; k >= 0; --k) v = (v << 8) | b[at + size_t(k)];
  return v;
}
}  // namespace

NpyArray read_npy(const std::string& path) { return parse_npy(read_file(path), path); }

float npy_value(const NpyArray& a, size_t i) {
  if (a.dtype == "f4") { float v; std::memcpy(&v, &a.data[i * 4], 4); return v; }
  if (a.dtype == "f8") { double v; std::memcpy(&v, &a.data[i * 8], 8); return float(v); }
  if (a.dtype == "f2") {
    uint16_t h;
    std::memcpy(&h, &a.data[i * 2], 2);
    const int exp = (h >> 10) & 0x1f, man = h & 0x3ff;
    const float sign = (h & 0x8000) ? -1.f : 1.f;
    if (exp == 0) return sign * std::ldexp(float(man), -24);
    if (exp == 31) return man ? NAN : sign * INFINITY;
    return sign * std::ldexp(float(man | 0x400), exp - 25);
  }
  if (a.dtype == "i1") return float(int8_t(a.data[i]));
  return float(a.data[i]);
}

std::vector<std::pair<std::string, NpyArray>> read_npz(const std::string& path) {
  const std::vector<uint8_t> b = read_file(path);
  // End of central directory (possibly zip64), then the central directory entries.
  if (b.size() < 22) fail("'", path, "' is not an .npz (zip) file");
  size_t eocd = std::string::npos;
  for (size_t k = b.size() - 22 + 1; k-- > 0 && b.size() - k < 65557;)
    if (le(b, k, 4) == 0x06054b50) { eocd = k; break; }
  if (eocd == std::string::npos) fail("'", path, "' is not an .npz (zip) file");
  uint64_t entries = le(b, eocd + 10, 2), cd = le(b, eocd + 16, 4);
  if ((cd == 0xffffffff || entries == 0xffff) && eocd >= 20 && le(b, eocd - 20, 4) == 0x07064b50) {
    const uint64_t z64 = le(b, eocd - 20 + 8, 8);
    if (le(b, size_t(z64), 4) != 0x06064b50) fail("'", path, "': bad zip64 directory");
    entries = le(b, size_t(z64) + 32, 8);
    cd = le(b, size_t(z64) + 48, 8);
  }
  std::vector<std::pair<std::string, NpyArray>> out;
  size_t at = size_t(cd);
  for (uint64_t e = 0; e < entries; ++e) {
    if (le(b, at, 4) != 0x02014b50) fail("'", path, "': bad zip directory entry");
    const uint64_t method = le(b, at + 10, 2);
    uint64_t csize = le(b, at + 20, 4), usize = le(b, at + 24, 4), local = le(b, at + 42, 4);
    const size_t nlen = size_t(le(b, at + 28, 2)), xlen = size_t(le(b, at + 30, 2)), clen = size_t(le(b, at + 32, 2));
    if (at + 46 + nlen > b.size()) fail("'", path, "': truncated");
    std::string name(b.begin() + long(at + 46), b.begin() + long(at + 46 + nlen));
    for (size_t x = at + 46 + nlen; x + 4 <= at + 46 + nlen + xlen;) {  // zip64 extra field
      const uint64_t id = le(b, x, 2), len = le(b, x + 2, 2);
      if (id == 1) {
        size_t p = x + 4;
        if (usize == 0xffffffff) usize = le(b, p, 8), p += 8;
        if (csize == 0xffffffff) csize = le(b, p, 8), p += 8;
        if (local == 0xffffffff) local = le(b, p, 8);
      }
      x += 4 + size_t(len);
    }
    if (method != 0)
      fail("'", path, "': entry '", name, "' is compressed; save calibration data with np.savez (not savez_compressed)");
    const size_t data = size_t(local) + 30 + size_t(le(b, size_t(local) + 26, 2)) + size_t(le(b, size_t(local) + 28, 2));
    if (data + csize > b.size()) fail("'", path, "': entry '", name, "' is truncated");
    const std::vector<uint8_t> npy(b.begin() + long(data), b.begin() + long(data + csize));
    if (name.size() > 4 && name.substr(name.size() - 4) == ".npy") name.resize(name.size() - 4);
    out.emplace_back(name, parse_npy(npy, path + ":" + name));
    at += 46 + nlen + xlen + clen;
  }
  return out;
}

NpyArray parse_npy(const std::vector<uint8_t>& bytes, const std::string& path) {
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
