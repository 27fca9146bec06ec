// The CUDA backend's run-time switches (SOFTDLA_CUDA_*, listed in docs/RUNTIME.md): a variable's value as a
// flag or a number. Each switch's function reads it once, into a function-local static.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace softdla::gpu {

// Whether `variable` is set to exactly `value`.
inline bool env_is(const char* variable, const char* value) {
  const char* v = std::getenv(variable);
  return v && std::strcmp(v, value) == 0;
}

// `variable`'s value as an unsigned integer (strtoul: a malformed value reads as its leading digits, or 0);
// `fallback` where it is unset or empty.
inline uint32_t env_uint(const char* variable, uint32_t fallback) {
  const char* v = std::getenv(variable);
  return v && *v ? uint32_t(std::strtoul(v, nullptr, 10)) : fallback;
}

// `variable`'s value as a number (strtod); `fallback` where it is unset or empty.
inline double env_double(const char* variable, double fallback) {
  const char* v = std::getenv(variable);
  return v && *v ? std::strtod(v, nullptr) : fallback;
}

}  // namespace softdla::gpu
