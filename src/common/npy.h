// Minimal reader/writer of NumPy .npy files (version 1.0/2.0, little-endian, C order) for the CLI.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace softdla {

struct NpyArray {
  std::string dtype;              // "f4", "f8", "f2", "i1", "u1"
  std::vector<uint64_t> shape;
  std::vector<uint8_t> data;
};

NpyArray read_npy(const std::string& path);
// Parses .npy bytes (`what` names the source in errors).
NpyArray parse_npy(const std::vector<uint8_t>& bytes, const std::string& what);
// The arrays of an .npz archive (np.savez; stored entries, np.savez_compressed needs zlib: rejected
// with a message), keyed by array name.
std::vector<std::pair<std::string, NpyArray>> read_npz(const std::string& path);
// Element i as float.
float npy_value(const NpyArray& a, size_t i);
void write_npy(const std::string& path, const NpyArray& array);

}  // namespace softdla
