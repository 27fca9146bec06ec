// The data movement around the VNNI GEMM (gemm_vnni.h): activations into offset byte quads, and the
// requantization of int32 accumulators in the window form (requant_window.h), per instruction set.
#pragma once
#include <cstddef>
#include <cstdint>

#include "cpu_isa.h"
#include "requant_window.h"

namespace softdla::cpu {

// Packs int8 rows [kdim][ld] (row k starts at rows + k * ld; `cols` columns are read, never more) into
// gemm_vnni's B layout: per panel of 16 columns, per quad of rows, 16 lanes of 4 bytes x + 128. Rows past
// kdim (up to the quad) pack as zeros: their weights are zero.
void pack_quads(const int8_t* rows, size_t ld, size_t kdim, size_t cols, uint8_t* out);

// out[i] = sat8(requant_window_value(acc[i], w)) (the non-negative form when w has the flag).
void requantize_window(Isa isa, const int32_t* acc, const num::RequantWindow& w, int8_t* out, size_t count);

}  // namespace softdla::cpu
