#include "gemm.h"

#include "cpu_isa.h"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define SOFTDLA_X86 1
#endif

namespace softdla::cpu {
namespace {

// Each int16 pair product sum is at most 2 * 128 * 128 = 2^15 in magnitude, so 2^15 pairs fit in int32.
constexpr size_t kPairChunk = size_t(1) << 15;

// ---------------------------------------------------------------- portable kernels
template <size_t R>
void tile_f32_portable(const float* const* a, const float* panel, size_t k, float (*out)[kPanel]) {
  float acc[R][kPanel] = {};
  for (size_t p = 0; p < k; ++p) {
    const float* b = panel + p * kPanel;
    for (size_t r = 0; r < R; ++r)
      for (size_t j = 0; j < kPanel; ++j) acc[r][j] += a[r][p] * b[j];
  }
  std::memcpy(out, acc, sizeof(acc));
}

template <size_t R>
void tile_s8_portable(const int32_t* const* a, const int16_t* panel, size_t q0, size_t q1, int32_t (*out)[kPanel]) {
  for (size_t r = 0; r < R; ++r) std::fill(out[r], out[r] + kPanel, 0);
  for (size_t q = q0; q < q1; ++q) {
    const int16_t* b = panel + q * kPanel * 2;
    for (size_t r = 0; r < R; ++r) {
      const int32_t a0 = int16_t(a[r][q] & 0xffff), a1 = int16_t(uint32_t(a[r][q]) >> 16);
      for (size_t j = 0; j < kPanel; ++j) out[r][j] += a0 * b[2 * j] + a1 * b[2 * j + 1];
    }
  }
}

#ifdef SOFTDLA_X86
// ---------------------------------------------------------------- AVX2 kernels
// Accumulators are named variables so they stay in registers (an array gets spilled every iteration).
// Short row blocks are handled by the caller pointing the missing rows at a zero row.
constexpr size_t kRowsF32 = 6, kRowsS8 = 6;

__attribute__((target("avx2,fma"))) void tile6_f32_avx2(const float* const* a, const float* panel, size_t k,
                                                        float (*out)[kPanel]) {
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *a4 = a[4], *a5 = a[5];
  for (size_t p = 0; p < k; ++p) {
    const __m256 b0 = _mm256_loadu_ps(panel + p * kPanel), b1 = _mm256_loadu_ps(panel + p * kPanel + 8);
    __m256 av = _mm256_broadcast_ss(a0 + p);
    c00 = _mm256_fmadd_ps(av, b0, c00), c01 = _mm256_fmadd_ps(av, b1, c01);
    av = _mm256_broadcast_ss(a1 + p);
    c10 = _mm256_fmadd_ps(av, b0, c10), c11 = _mm256_fmadd_ps(av, b1, c11);
    av = _mm256_broadcast_ss(a2 + p);
    c20 = _mm256_fmadd_ps(av, b0, c20), c21 = _mm256_fmadd_ps(av, b1, c21);
    av = _mm256_broadcast_ss(a3 + p);
    c30 = _mm256_fmadd_ps(av, b0, c30), c31 = _mm256_fmadd_ps(av, b1, c31);
    av = _mm256_broadcast_ss(a4 + p);
    c40 = _mm256_fmadd_ps(av, b0, c40), c41 = _mm256_fmadd_ps(av, b1, c41);
    av = _mm256_broadcast_ss(a5 + p);
    c50 = _mm256_fmadd_ps(av, b0, c50), c51 = _mm256_fmadd_ps(av, b1, c51);
  }
  _mm256_storeu_ps(out[0], c00), _mm256_storeu_ps(out[0] + 8, c01);
  _mm256_storeu_ps(out[1], c10), _mm256_storeu_ps(out[1] + 8, c11);
  _mm256_storeu_ps(out[2], c20), _mm256_storeu_ps(out[2] + 8, c21);
  _mm256_storeu_ps(out[3], c30), _mm256_storeu_ps(out[3] + 8, c31);
  _mm256_storeu_ps(out[4], c40), _mm256_storeu_ps(out[4] + 8, c41);
  _mm256_storeu_ps(out[5], c50), _mm256_storeu_ps(out[5] + 8, c51);
}

// madd multiplies the (k even, k odd) int16 pair of A with the interleaved pair of each B column:
// 8 columns per register, exact int32 sums.
__attribute__((target("avx2"))) void tile6_s8_avx2(const int32_t* const* a, const int16_t* panel, size_t q0,
                                                   size_t q1, int32_t (*out)[kPanel]) {
  __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00,
          c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  const int32_t *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *a4 = a[4], *a5 = a[5];
  for (size_t q = q0; q < q1; ++q) {
    const __m256i* b = reinterpret_cast<const __m256i*>(panel + q * kPanel * 2);
    const __m256i b0 = _mm256_loadu_si256(b), b1 = _mm256_loadu_si256(b + 1);
    __m256i av = _mm256_set1_epi32(a0[q]);
    c00 = _mm256_add_epi32(c00, _mm256_madd_epi16(av, b0)), c01 = _mm256_add_epi32(c01, _mm256_madd_epi16(av, b1));
    av = _mm256_set1_epi32(a1[q]);
    c10 = _mm256_add_epi32(c10, _mm256_madd_epi16(av, b0)), c11 = _mm256_add_epi32(c11, _mm256_madd_epi16(av, b1));
    av = _mm256_set1_epi32(a2[q]);
    c20 = _mm256_add_epi32(c20, _mm256_madd_epi16(av, b0)), c21 = _mm256_add_epi32(c21, _mm256_madd_epi16(av, b1));
    av = _mm256_set1_epi32(a3[q]);
    c30 = _mm256_add_epi32(c30, _mm256_madd_epi16(av, b0)), c31 = _mm256_add_epi32(c31, _mm256_madd_epi16(av, b1));
    av = _mm256_set1_epi32(a4[q]);
    c40 = _mm256_add_epi32(c40, _mm256_madd_epi16(av, b0)), c41 = _mm256_add_epi32(c41, _mm256_madd_epi16(av, b1));
    av = _mm256_set1_epi32(a5[q]);
    c50 = _mm256_add_epi32(c50, _mm256_madd_epi16(av, b0)), c51 = _mm256_add_epi32(c51, _mm256_madd_epi16(av, b1));
  }
  __m256i* o = reinterpret_cast<__m256i*>(out);  // out is 6 rows x 16 int32, contiguous
  _mm256_storeu_si256(o + 0, c00), _mm256_storeu_si256(o + 1, c01), _mm256_storeu_si256(o + 2, c10);
  _mm256_storeu_si256(o + 3, c11), _mm256_storeu_si256(o + 4, c20), _mm256_storeu_si256(o + 5, c21);
  _mm256_storeu_si256(o + 6, c30), _mm256_storeu_si256(o + 7, c31), _mm256_storeu_si256(o + 8, c40);
  _mm256_storeu_si256(o + 9, c41), _mm256_storeu_si256(o + 10, c50), _mm256_storeu_si256(o + 11, c51);
}

bool has_avx2() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}
#else
bool has_avx2() { return false; }
#endif

#ifndef SOFTDLA_X86
constexpr size_t kRowsF32 = 6, kRowsS8 = 6;
#endif

void tile_f32(const float* const* a, const float* panel, size_t k, float (*out)[kPanel]) {
#ifdef SOFTDLA_X86
  if (has_avx2()) return tile6_f32_avx2(a, panel, k, out);
#endif
  tile_f32_portable<kRowsF32>(a, panel, k, out);
}

void tile_s8(const int32_t* const* a, const int16_t* panel, size_t q0, size_t q1, int32_t (*out)[kPanel]) {
#ifdef SOFTDLA_X86
  if (active_isa() >= Isa::kAvx2 && has_avx2()) return tile6_s8_avx2(a, panel, q0, q1, out);
#endif
  tile_s8_portable<kRowsS8>(a, panel, q0, q1, out);
}

}  // namespace

void pack_b_f32(const float* b, size_t k, size_t n, size_t ldb, float* out) {
  for (size_t p = 0; p < k; ++p)
    for (size_t j = 0; j < n; ++j) out[packed_f32_index(p, j, k)] = b[p * ldb + j];
}

void pack_b_s8(const int8_t* b, size_t k, size_t n, size_t ldb, int16_t* out) {
  for (size_t p = 0; p < k; ++p)
    for (size_t j = 0; j < n; ++j) out[packed_s8_index(p, j, k)] = b[p * ldb + j];
}

std::vector<int32_t> pack_a_s8(const int8_t* a, size_t m, size_t k) {
  const size_t kp = k_pairs(k);
  std::vector<int32_t> out(m * kp, 0);
  for (size_t i = 0; i < m; ++i)
    for (size_t q = 0; q < kp; ++q) {
      const int16_t lo = a[i * k + 2 * q];
      const int16_t hi = 2 * q + 1 < k ? a[i * k + 2 * q + 1] : 0;
      out[i * kp + q] = int32_t(uint32_t(uint16_t(lo)) | (uint32_t(uint16_t(hi)) << 16));
    }
  return out;
}

void gemm_f32(const float* a, const float* bp, float* c, size_t m, size_t n, size_t k, size_t ldc) {
  thread_local std::vector<float> zero_row;
  zero_row.assign(k, 0.f);
  for (size_t row = 0; row < m; row += kRowsF32) {
    const size_t rows = std::min(kRowsF32, m - row);
    const float* a_rows[kRowsF32];
    for (size_t r = 0; r < kRowsF32; ++r) a_rows[r] = r < rows ? a + (row + r) * k : zero_row.data();
    for (size_t p = 0; p < panels(n); ++p) {
      float tile[kRowsF32][kPanel];
      tile_f32(a_rows, bp + p * k * kPanel, k, tile);
      const size_t cols = std::min(kPanel, n - p * kPanel);
      for (size_t r = 0; r < rows; ++r) std::memcpy(c + (row + r) * ldc + p * kPanel, tile[r], cols * sizeof(float));
    }
  }
}

void gemm_s8(const int32_t* ap, const int16_t* bp, int64_t* c, size_t m, size_t n, size_t k, size_t ldc) {
  const size_t kp = k_pairs(k);
  thread_local std::vector<int32_t> zero_row;
  zero_row.assign(kp, 0);
  for (size_t row = 0; row < m; row += kRowsS8) {
    const size_t rows = std::min(kRowsS8, m - row);
    const int32_t* a_rows[kRowsS8];
    for (size_t r = 0; r < kRowsS8; ++r) a_rows[r] = r < rows ? ap + (row + r) * kp : zero_row.data();
    for (size_t p = 0; p < panels(n); ++p) {
      const int16_t* panel = bp + p * kp * kPanel * 2;
      int64_t wide[kRowsS8][kPanel] = {};
      for (size_t q0 = 0; q0 < kp; q0 += kPairChunk) {
        int32_t tile[kRowsS8][kPanel];
        tile_s8(a_rows, panel, q0, std::min(kp, q0 + kPairChunk), tile);
        for (size_t r = 0; r < rows; ++r)
          for (size_t j = 0; j < kPanel; ++j) wide[r][j] += tile[r][j];
      }
      const size_t cols = std::min(kPanel, n - p * kPanel);
      for (size_t r = 0; r < rows; ++r) std::memcpy(c + (row + r) * ldc + p * kPanel, wide[r], cols * sizeof(int64_t));
    }
  }
}

}  // namespace softdla::cpu
