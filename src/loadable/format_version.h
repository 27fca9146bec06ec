// Semantic version of the loadable format this code reads and writes (docs/LOADABLE.md).
#pragma once
#include <cstdint>

namespace softdla {
inline constexpr uint16_t kFormatMajor = 1;  // readers reject any other major
inline constexpr uint16_t kFormatMinor = 0;  // newer minors only add fields: read with a warning
inline constexpr uint16_t kFormatPatch = 0;
inline constexpr const char* kSoftdlaVersion = "0.1.0";
}  // namespace softdla
