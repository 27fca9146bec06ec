// Loading and storing one element of a float tensor in its storage type.
#pragma once
#include <cstdint>

#include "numerics.h"

namespace softdla::cpu {

inline float load(const float* p, size_t i) { return p[i]; }
inline float load(const uint16_t* p, size_t i) { return num::half_to_float(p[i]); }
inline void store(float* p, size_t i, float v) { p[i] = v; }
inline void store(uint16_t* p, size_t i, float v) { p[i] = num::float_to_half(v); }

}  // namespace softdla::cpu
