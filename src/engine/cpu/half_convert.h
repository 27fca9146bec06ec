// Bulk fp16 <-> fp32 conversion with the rules of numerics.h (RNE, saturation to +-65504, every NaN
// stored as the quiet NaN 0x7e00). The path follows SOFTDLA_CPU_ISA (cpu_isa.h): AVX-512F from
// avx512vnni up, F16C for avx2 / avxvnni (where the CPU has it), plain C++ for portable; results are
// bit-identical to num::half_to_float / num::float_to_half on every path (tests/cpp/cpu_paths_test.cpp).
#pragma once
#include <cstddef>
#include <cstdint>

#include "cpu_isa.h"

namespace softdla::cpu {

void halves_to_floats(const uint16_t* in, float* out, size_t n);
void floats_to_halves(const float* in, uint16_t* out, size_t n);

// Whether the CPU has F16C (the 256-bit conversions the avx2 path's kernels read fp16 with).
bool cpu_has_f16c();

// The same on a given path (tests); the CPU must be able to run it.
void halves_to_floats(Isa isa, const uint16_t* in, float* out, size_t n);
void floats_to_halves(Isa isa, const float* in, uint16_t* out, size_t n);

}  // namespace softdla::cpu
