// GEMM cores for convolution and deconvolution: C[M x N] = A[M x K] * B[K x N].
//
// B is packed into panels of kPanel columns so the micro-kernels stream it contiguously:
//   fp32: panel p holds B[k][p*16 + j] at [p][k][j]
//   int8: panel p holds int16 pairs (B[2q][p*16 + j], B[2q+1][p*16 + j]) at [p][q][j][2] (K padded to even)
// A for INT8 is packed once per weight tensor into int32 words holding two int16 (k even, k odd).
// INT8 results are exact: products summed in int32 over K-chunks that cannot overflow, then widened.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cpu_isa.h"

namespace softdla::cpu {

inline constexpr size_t kPanel = 16;
// The fp32 GEMM of the avx2 and portable paths takes K in blocks of this many (B's rows a block reads are
// what must stay in cache).
inline constexpr size_t kGemmBlockK = 512;

inline size_t panels(size_t n) { return (n + kPanel - 1) / kPanel; }
inline size_t k_pairs(size_t k) { return (k + 1) / 2; }
inline size_t packed_f32_size(size_t k, size_t n) { return panels(n) * k * kPanel; }
inline size_t packed_s8_size(size_t k, size_t n) { return panels(n) * k_pairs(k) * kPanel * 2; }

// Index of element (k, j) in a packed B.
inline size_t packed_f32_index(size_t k, size_t j, size_t kdim) {
  return (j / kPanel) * kdim * kPanel + k * kPanel + j % kPanel;
}
inline size_t packed_s8_index(size_t k, size_t j, size_t kdim) {
  return ((j / kPanel) * k_pairs(kdim) + k / 2) * kPanel * 2 + (j % kPanel) * 2 + k % 2;
}

// Packs a row-major B (ldb = row stride). The packed buffer must be zero-filled beforehand.
void pack_b_f32(const float* b, size_t k, size_t n, size_t ldb, float* out);
void pack_b_s8(const int8_t* b, size_t k, size_t n, size_t ldb, int16_t* out);
// Packs row-major int8 A [m x k] into int16 pairs.
std::vector<int32_t> pack_a_s8(const int8_t* a, size_t m, size_t k);

// C (row-major, row stride ldc, n columns) = A * packed B. Overwrites C.
// fp32 on the path active_isa() picks: 12x32 AVX-512F tiles (avx512vnni and up), 6x16 AVX2+FMA tiles (avx2,
// avxvnni), or plain C++ (portable). The two FMA paths give every element the same FMAs in the same
// order (k ascending from 0), so the same bits; the portable one rounds each product.
void gemm_f32(const float* a, const float* bp, float* c, size_t m, size_t n, size_t k, size_t ldc);
// The same on a given path (tests); the CPU must be able to run it.
void gemm_f32(Isa isa, const float* a, const float* bp, float* c, size_t m, size_t n, size_t k, size_t ldc);
// The same with B row-major (row stride ldb) instead of packed, on the avx2 and portable paths only (the
// same FMAs as gemm_f32 on those paths): each row of B is read up to the next multiple of 16 columns past
// n, so those reads must be in bounds (their values are never used).
void gemm_f32_rows(Isa isa, const float* a, const float* b, size_t ldb, float* c, size_t m, size_t n, size_t k,
                   size_t ldc);
void gemm_s8(const int32_t* ap, const int16_t* bp, int64_t* c, size_t m, size_t n, size_t k, size_t ldc);

}  // namespace softdla::cpu
