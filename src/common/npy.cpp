#include "npy.h"

#include <cmath>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "checked.h"
#include "error.h"
#include "file_bytes.h"

namespace softdla {

static size_t dtype_size(const std::string& d, const std::string& path) {
  if (d == "f4") return 4;
  if (d == "f8") return 8;
  if (d == "f2") return 2;
  if (d == "i1" || d == "u1" || d == "b1") return 1;
  if (d == "i2" || d == "u2") return 2;
  if (d == "i4" || d == "u4") return 4;
  if (d == "i8" || d == "u8") return 8;
  fail("'", path, "': unsupported .npy dtype '", d, "' (use a float, integer or bool type)");
}

namespace {
// A little-endian field of a zip structure, bounds-checked without overflow.
uint64_t le(const std::vector<uint8_t>& b, uint64_t at, int n, const std::string& path) {
  if (at > b.size() || uint64_t(n) > b.size() - at) fail("'", path, "' is not a valid .npz: a zip structure runs past the end of the file");
  uint64_t v = 0;
  for (int k = n - 1; k >= 0; --k) v = (v << 8) | b[size_t(at) + size_t(k)];
  return v;
}
}  // namespace

NpyArray read_npy(const std::string& path) { return parse_npy(read_file_bytes(path, ".npy file", kNoFileSizeLimit), path); }

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
  // Wider integers (NumPy's default int64 above all: labels, argmax results, integer images).
  const auto read = [&](auto v) {
    std::memcpy(&v, &a.data[i * sizeof(v)], sizeof(v));
    return float(v);
  };
  if (a.dtype == "i2") return read(int16_t{});
  if (a.dtype == "u2") return read(uint16_t{});
  if (a.dtype == "i4") return read(int32_t{});
  if (a.dtype == "u4") return read(uint32_t{});
  if (a.dtype == "i8") return read(int64_t{});
  if (a.dtype == "u8") return read(uint64_t{});
  return float(a.data[i]);  // u1, b1
}

std::vector<std::pair<std::string, NpyArray>> read_npz(const std::string& path) {
  const std::vector<uint8_t> b = read_file_bytes(path, ".npz file", kNoFileSizeLimit);
  const auto field = [&](uint64_t at, int n) { return le(b, at, n, path); };
  // Offsets and sizes come from the file: every sum is checked, and every range against the file size.
  const auto add = [&](uint64_t a, uint64_t c) { return checked_add(a, c, "'" + path + "': a zip offset"); };
  // End of central directory (possibly zip64), then the central directory entries.
  if (b.size() < 22) fail("'", path, "' is not an .npz (zip) file");
  size_t eocd = std::string::npos;
  for (size_t k = b.size() - 22 + 1; k-- > 0 && b.size() - k < 65557;)
    if (field(k, 4) == 0x06054b50) { eocd = k; break; }
  if (eocd == std::string::npos) fail("'", path, "' is not an .npz (zip) file");
  uint64_t entries = field(eocd + 10, 2), cd = field(eocd + 16, 4);
  if ((cd == 0xffffffff || entries == 0xffff) && eocd >= 20 && field(eocd - 20, 4) == 0x07064b50) {
    const uint64_t z64 = field(eocd - 20 + 8, 8);
    if (field(z64, 4) != 0x06064b50) fail("'", path, "' is not a valid .npz: bad zip64 directory");
    entries = field(add(z64, 32), 8);
    cd = field(add(z64, 48), 8);
  }
  std::vector<std::pair<std::string, NpyArray>> out;
  uint64_t at = cd;
  for (uint64_t e = 0; e < entries; ++e) {
    if (field(at, 4) != 0x02014b50) fail("'", path, "' is not a valid .npz: bad zip directory entry ", e);
    const uint64_t method = field(at + 10, 2);
    uint64_t csize = field(at + 20, 4), usize = field(at + 24, 4), local = field(at + 42, 4);
    const uint64_t nlen = field(at + 28, 2), xlen = field(at + 30, 2), clen = field(at + 32, 2);
    const uint64_t name_at = at + 46, extra_at = add(name_at, nlen), extra_end = add(extra_at, xlen);
    if (extra_end > b.size()) fail("'", path, "' is truncated (zip directory entry ", e, ")");
    std::string name(b.begin() + long(name_at), b.begin() + long(extra_at));
    for (uint64_t x = extra_at; x + 4 <= extra_end;) {  // zip64 extra field
      const uint64_t id = field(x, 2), len = field(x + 2, 2);
      if (id == 1) {
        uint64_t p = x + 4;
        if (usize == 0xffffffff) usize = field(p, 8), p += 8;
        if (csize == 0xffffffff) csize = field(p, 8), p += 8;
        if (local == 0xffffffff) local = field(p, 8);
      }
      x += 4 + len;
    }
    if (method != 0)
      fail("'", path, "': entry '", name, "' is compressed; save calibration data with np.savez (not savez_compressed)");
    if (csize != usize)
      fail("'", path, "' is not a valid .npz: stored entry '", name, "' has compressed size ", csize, " but size ", usize);
    const uint64_t data = add(add(add(local, 30), field(add(local, 26), 2)), field(add(local, 28), 2));
    if (data > b.size() || csize > b.size() - data)
      fail("'", path, "': entry '", name, "' claims ", csize, " bytes at offset ", data, " but the file has ", b.size());
    const std::vector<uint8_t> npy(b.begin() + long(data), b.begin() + long(data + csize));
    if (name.size() > 4 && name.substr(name.size() - 4) == ".npy") name.resize(name.size() - 4);
    out.emplace_back(name, parse_npy(npy, path + ":" + name));
    at = add(extra_end, clen);
  }
  return out;
}

namespace {
// The dimensions of a header's shape tuple, "(2, 3)", "(5,)" or "()": non-negative integers only.
std::vector<uint64_t> parse_shape(const std::string& dims, const std::string& path) {
  std::vector<uint64_t> shape;
  size_t k = 0;
  const auto skip_space = [&] { while (k < dims.size() && dims[k] == ' ') ++k; };
  skip_space();
  while (k < dims.size()) {
    if (dims[k] == '-') fail("'", path, "': the shape (", dims, ") has a negative dimension");
    uint64_t d = 0;
    const size_t first = k;
    for (; k < dims.size() && dims[k] >= '0' && dims[k] <= '9'; ++k)
      d = checked_add(checked_mul(d, 10u, "'" + path + "': a dimension"), unsigned(dims[k] - '0'), "'" + path + "': a dimension");
    if (k == first) fail("'", path, "': the shape (", dims, ") is not a tuple of whole numbers");
    if (k < dims.size() && dims[k] == 'L') ++k;  // Python 2 wrote long integers as 5L
    shape.push_back(d);
    skip_space();
    if (k < dims.size() && dims[k] != ',') fail("'", path, "': the shape (", dims, ") is not a tuple of whole numbers");
    ++k;
    skip_space();
  }
  return shape;
}
// The text between `open` and `close` after 'key': in a header dict, e.g. <f4 for descr.
std::string header_value(const std::string& header, const std::string& key, char open, char close, const std::string& path) {
  size_t k = header.find("'" + key + "':");
  if (k == std::string::npos) fail("'", path, "': the .npy header has no '", key, "'");
  k += key.size() + 3;
  while (k < header.size() && header[k] == ' ') ++k;
  const size_t end = k < header.size() && header[k] == open ? header.find(close, k + 1) : std::string::npos;
  if (end == std::string::npos) fail("'", path, "': cannot read '", key, "' in the .npy header");
  return header.substr(k + 1, end - k - 1);
}
}  // namespace

NpyArray parse_npy(const std::vector<uint8_t>& bytes, const std::string& path) {
  if (bytes.size() < 10 || std::memcmp(bytes.data(), "\x93NUMPY", 6) != 0) fail("'", path, "' is not a .npy file");
  // Versions 1.0 (2-byte header length), 2.0 and 3.0 (4-byte length; 3.0 only allows UTF-8 in the header).
  const int major = bytes[6], minor = bytes[7];
  if (major < 1 || major > 3 || minor != 0)
    fail("'", path, "' is .npy format version ", major, ".", minor, "; only 1.0, 2.0 and 3.0 exist (save it with numpy.save)");
  uint64_t header_len, start;
  if (major == 1) {
    header_len = bytes[8] | (uint64_t(bytes[9]) << 8);
    start = 10;
  } else {
    if (bytes.size() < 12) fail("'", path, "' is truncated");
    header_len = bytes[8] | (uint64_t(bytes[9]) << 8) | (uint64_t(bytes[10]) << 16) | (uint64_t(bytes[11]) << 24);
    start = 12;
  }
  if (header_len > bytes.size() - start) fail("'", path, "' is truncated: its header needs ", header_len, " bytes");
  const uint64_t data_at = start + header_len;
  const std::string header(bytes.begin() + long(start), bytes.begin() + long(data_at));
  NpyArray a;
  const std::string descr = header_value(header, "descr", '\'', '\'', path);
  if (descr.size() == 3 && descr[0] == '>') fail("'", path, "': big-endian arrays are not supported (save it with dtype '<", descr.substr(1), "')");
  if (descr.size() != 3 || (descr[0] != '<' && descr[0] != '|' && descr[0] != '='))
    fail("'", path, "': dtype '", descr, "' is not a little-endian number type");
  a.dtype = descr.substr(1);
  dtype_size(a.dtype, path);
  if (header.find("'fortran_order': True") != std::string::npos)
    fail("'", path, "': Fortran order not supported (save np.ascontiguousarray(a))");
  a.shape = parse_shape(header_value(header, "shape", '(', ')', path), path);
  // Checked against the bytes present before anything is allocated: a header may claim any shape.
  const uint64_t count = checked_product(a.shape, "'" + path + "' is corrupt: its shape");
  const uint64_t bytes_needed = checked_mul(count, dtype_size(a.dtype, path), "'" + path + "' is corrupt: its data size");
  if (bytes.size() - data_at < bytes_needed)
    fail("'", path, "' holds ", bytes.size() - data_at, " bytes of data but its shape needs ", bytes_needed);
  a.data.assign(bytes.begin() + long(data_at), bytes.begin() + long(data_at + bytes_needed));
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
  if (!f) fail("cannot write '", path, "' (", std::strerror(errno), ")");
  const uint8_t lead[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, uint8_t(header.size() & 0xff), uint8_t(header.size() >> 8)};
  f.write(reinterpret_cast<const char*>(lead), 10);
  f.write(header.data(), std::streamsize(header.size()));
  f.write(reinterpret_cast<const char*>(a.data.data()), std::streamsize(a.data.size()));
  f.close();  // flushes: a full disk shows here
  if (!f) fail("failed writing '", path, "' (", std::strerror(errno), ")");
}

}  // namespace softdla
