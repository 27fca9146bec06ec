// Bulk fp16 <-> fp32 conversion with the rules of numerics.h (RNE, saturation to +-65504, NaN kept as
// the canonical quiet NaN with its sign). Uses F16C when the CPU has it; results are bit-identical to
// num::half_to_float / num::float_to_half either way (tests/cpp/numerics_test.cpp checks it).
#pragma once
#include <cstddef>
#include <cstdint>

namespace softdla::cpu {

void halves_to_floats(const uint16_t* in, float* out, size_t n);
void floats_to_halves(const float* in, uint16_t* out, size_t n);

}  // namespace softdla::cpu
