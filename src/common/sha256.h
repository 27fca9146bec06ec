// SHA-256 (FIPS 180-4) of a byte string, as lowercase hex: identifies the source model of a loadable.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace softdla {
std::string sha256_hex(const uint8_t* data, size_t size);
inline std::string sha256_hex(const std::vector<uint8_t>& v) { return sha256_hex(v.data(), v.size()); }
}  // namespace softdla
