// The INT8 GEMM on vpdpbusd (AVX-512 VNNI, AVX-VNNI): C[M x N] (int32) = A[M x K] (int8 weights) *
// B[K x N] (int8 activations), exact.
//
// vpdpbusd multiplies unsigned by signed bytes, four at a time into each 32-bit lane. The activations
// are therefore stored offset by 128 (x ^ 0x80 = x + 128 as an unsigned byte), and the offset is taken
// back per row: sum(w * (x + 128)) - 128 * sum(w). Both terms are exact in int32 while K <= kVnniMaxK.
//
//   B packed: panels of kPanel columns; panel p holds quads (B[4q..4q+3][p*16 + j] + 128) at [p][q][j][4]
//   A packed: row i holds the quads (A[i][4q..4q+3]) as int32 words, K padded with zeros to a multiple of 4
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "aligned_vector.h"
#include "cpu_isa.h"
#include "gemm.h"
#include "int8_requant.h"

namespace softdla::cpu {

// |sum(w * (x + 128))| <= K * 128 * 255 < 2^31, and without the offset the exact sum cannot saturate.
inline constexpr size_t kVnniMaxK = 65536;

// Whether a GEMM of depth k runs on AMX tiles: on the amx path, from 64 k up. A shallower one would
// be mostly padding (tiles take 64 k a step) and tile set-up, and vpdpbusd measured faster (MobileNetV2's
// 16-channel expansion: 0.20 against 0.24 ms).
inline bool gemm_on_amx(size_t k) { return active_isa() == Isa::kAmx && k >= 64; }
// Quads per row of A and per panel of B. AMX tiles take 16 quads (64 k) at a time, so there K is
// padded to a multiple of 64 (zero weights).
inline size_t k_quads(size_t k) {
  const size_t q = (k + 3) / 4;
  return gemm_on_amx(k) ? (q + 15) / 16 * 16 : q;
}
// Bytes of a packed B of n columns; with AMX one panel more, which a tile pair past an odd last panel reads.
inline size_t packed_u8_size(size_t k, size_t n) {
  return (panels(n) + (gemm_on_amx(k) ? 1 : 0)) * k_quads(k) * kPanel * 4;
}

struct VnniWeights {
  AlignedVector<int32_t> quads;        // [M][k_quads(K)], then 32 zero rows (AMX tiles read 32 rows at a time)
  std::vector<int32_t> offset_sums;  // 128 * sum of row i: what the offset adds to row i
  // With `lanes`: the quads again with output channels on the vector lanes, blocks of 48 rows,
  // [ceil(M / 48)][k_quads(K)][48] (zero rows past M), for GEMMs of few columns (gemm_lanes_s8.h).
  AlignedVector<int32_t> lanes;
  size_t k = 0;
};
VnniWeights pack_a_vnni(const int8_t* a, size_t m, size_t k, bool lanes = false);

// C (row-major int32, row stride ldc) = A * B for rows [0, m) of `a` (a.quads offset by the caller) and
// n columns of the packed B; the offset is already taken back. isa: kAvxVnni, kAvx512Vnni or kAmx (AMX
// tiles where gemm_on_amx(k), else AVX-512 VNNI).
void gemm_vnni(Isa isa, const int32_t* a_quads, const int32_t* offset_sums, const uint8_t* bp, int32_t* c, size_t m,
               size_t n, size_t k, size_t ldc);

// Whether gemm_vnni_s8 runs on this path: every AVX-512 path (on the amx path, AMX tiles where
// gemm_on_amx(k), each 32 x 32 block requantized, and added to the residual, as it leaves them).
bool gemm_vnni_s8_applies(Isa isa);
// gemm_vnni's product requantized to int8 tile by tile as it leaves the micro-kernel (no int32 C): row r,
// column j goes where `out` says for image 0 (int8_requant.h).
// lanes: the rows' block of VnniWeights::lanes (their first row a multiple of 48), or null; taken where
// lanes_s8::pays(m, n, k) (gemm_lanes_s8.h) and the AMX tiles do not apply.
void gemm_vnni_s8(const int32_t* a_quads, const int32_t* offset_sums, const uint8_t* bp, size_t m, size_t n, size_t k,
                  const Int8Output& out, const int32_t* lanes = nullptr);

// The fused GEMM on lane tiles (AVX-512 VNNI) with its columns gathered: column j's quad q (4 bytes of
// activations + 128) at base + col_off[j] + k_off[q], any address each, for the implicit convolution's
// small grids (conv_implicit.h). lanes: rows [0, m) as [ceil(m / 48)][kq][48] quads (zero past m); the
// results go where `out` says (row r, column j), as gemm_vnni_s8's do.
void gemm_lanes_s8_gather(const int32_t* lanes, const int32_t* offset_sums, const uint8_t* base, const size_t* col_off,
                          const size_t* k_off, size_t m, size_t n, size_t kq, const Int8Output& out);

}  // namespace softdla::cpu
