#include "gemm.h"

#include <algorithm>
#include <cstring>
#include <vector>

// Hot loops are compiled twice (AVX2+FMA and baseline x86-64) and picked at load time.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#define SOFTDLA_MULTIVERSION __attribute__((target_clones("arch=haswell", "default")))
#else
#define SOFTDLA_MULTIVERSION
#endif

namespace softdla::cpu {
namespace {

constexpr size_t kColBlock = 256;  // columns of B kept hot in L1/L2 while a row block runs

SOFTDLA_MULTIVERSION
void gemm_f32_block(const float* a, const float* b, float* c, size_t m, size_t n, size_t k,
                    size_t ldb, size_t ldc) {
  size_t i = 0;
  for (; i + 4 <= m; i += 4) {
    float* c0 = c + i * ldc;
    float* c1 = c0 + ldc;
    float* c2 = c1 + ldc;
    float* c3 = c2 + ldc;
    for (size_t p = 0; p < k; ++p) {
      const float a0 = a[i * k + p], a1 = a[(i + 1) * k + p], a2 = a[(i + 2) * k + p],
                  a3 = a[(i + 3) * k + p];
      const float* __restrict bp = b + p * ldb;
      for (size_t j = 0; j < n; ++j) {
        const float x = bp[j];
        c0[j] += a0 * x;
        c1[j] += a1 * x;
        c2[j] += a2 * x;
        c3[j] += a3 * x;
      }
    }
  }
  for (; i < m; ++i) {
    float* __restrict ci = c + i * ldc;
    for (size_t p = 0; p < k; ++p) {
      const float av = a[i * k + p];
      const float* __restrict bp = b + p * ldb;
      for (size_t j = 0; j < n; ++j) ci[j] += av * bp[j];
    }
  }
}

SOFTDLA_MULTIVERSION
void gemm_s8_block(const int8_t* a, const int8_t* b, int32_t* c, size_t m, size_t n, size_t k,
                   size_t lda, size_t ldb, size_t ldc) {
  size_t i = 0;
  for (; i + 4 <= m; i += 4) {
    int32_t* c0 = c + i * ldc;
    int32_t* c1 = c0 + ldc;
    int32_t* c2 = c1 + ldc;
    int32_t* c3 = c2 + ldc;
    for (size_t p = 0; p < k; ++p) {
      const int16_t a0 = a[i * lda + p], a1 = a[(i + 1) * lda + p], a2 = a[(i + 2) * lda + p],
                    a3 = a[(i + 3) * lda + p];
      const int8_t* __restrict bp = b + p * ldb;
      for (size_t j = 0; j < n; ++j) {
        const int16_t x = bp[j];
        c0[j] += int32_t(a0 * x);
        c1[j] += int32_t(a1 * x);
        c2[j] += int32_t(a2 * x);
        c3[j] += int32_t(a3 * x);
      }
    }
  }
  for (; i < m; ++i) {
    int32_t* __restrict ci = c + i * ldc;
    for (size_t p = 0; p < k; ++p) {
      const int16_t av = a[i * lda + p];
      const int8_t* __restrict bp = b + p * ldb;
      for (size_t j = 0; j < n; ++j) ci[j] += int32_t(av * int16_t(bp[j]));
    }
  }
}

}  // namespace

void gemm_f32(const float* a, const float* b, float* c, size_t m, size_t n, size_t k) {
  std::fill(c, c + m * n, 0.f);
  for (size_t j0 = 0; j0 < n; j0 += kColBlock) {
    const size_t nb = std::min(kColBlock, n - j0);
    gemm_f32_block(a, b + j0, c + j0, m, nb, k, n, n);
  }
}

void gemm_s8(const int8_t* a, const int8_t* b, int64_t* c, size_t m, size_t n, size_t k) {
  // |product| <= 2^14, so 2^16 products fit in int32 exactly.
  constexpr size_t kChunk = 1 << 16;
  std::fill(c, c + m * n, int64_t(0));
  std::vector<int32_t> part(m * std::min(kColBlock, n));
  for (size_t j0 = 0; j0 < n; j0 += kColBlock) {
    const size_t nb = std::min(kColBlock, n - j0);
    for (size_t p0 = 0; p0 < k; p0 += kChunk) {
      const size_t kb = std::min(kChunk, k - p0);
      std::fill(part.begin(), part.end(), 0);
      gemm_s8_block(a + p0, b + p0 * n + j0, part.data(), m, nb, kb, k, n, nb);
      for (size_t i = 0; i < m; ++i)
        for (size_t j = 0; j < nb; ++j) c[i * n + j0 + j] += part[i * nb + j];
    }
  }
}

}  // namespace softdla::cpu
