// The VNNI GEMM's right-hand side (gemm_vnni.h): activations into offset byte quads.
#pragma once
#include <cstddef>
#include <cstdint>


namespace softdla::cpu {

// Packs int8 rows [kdim][ld] (row k starts at rows + k * ld; `cols` columns are read, never more) into
// gemm_vnni's B layout: per panel of 16 columns, per quad of rows, 16 lanes of 4 bytes x + 128. Rows past
// kdim (up to the quad) pack as zeros: their weights are zero.
void pack_quads(const int8_t* rows, size_t ld, size_t kdim, size_t cols, uint8_t* out);

}  // namespace softdla::cpu
