// Minimal reader/writer of NumPy .npy files (version 1.0/2.0, little-endian, C order) for the CLI.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace softdla {

struct NpyArray {
  std::string dtype;              // "f4", "f2", "i1", "u1"
  std::vector<uint64_t> shape;
  std::vector<uint8_t> data;
};

NpyArray read_npy(const std::string& path);
void write_npy(const std::string& path, const NpyArray& array);

}  // namespace softdla
