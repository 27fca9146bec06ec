// Semantic version of the loadable format this code reads and writes (docs/LOADABLE.md).
#pragma once
#include <cstdint>

namespace softdla {
inline constexpr uint16_t kFormatMajor = 1;  // readers reject any other major
inline constexpr uint16_t kFormatMinor = 0;  // newer minors only add fields: read with a warning
inline constexpr uint16_t kFormatPatch = 0;
// softdla's own version: pyproject.toml's, passed in by CMake (cmake/version.cmake), so `softdla --version`,
// softdla.__version__ and the wheel never disagree.
#ifndef SOFTDLA_VERSION
#error "SOFTDLA_VERSION is defined by CMake (target softdla_loadable) from pyproject.toml"
#endif
inline constexpr const char* kSoftdlaVersion = SOFTDLA_VERSION;
}  // namespace softdla
