#include "gemm.h"

#include "cpu_isa.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "f32_tile_rows.h"
#include "panel_stream.h"
#include "x86_simd.h"

namespace softdla::cpu {
namespace {

// Each int16 pair product sum is at most 2 * 128 * 128 = 2^15 in magnitude, so 2^15 pairs fit in int32.
constexpr size_t kPairChunk = size_t(1) << 15;

// ---------------------------------------------------------------- portable kernels
// B row p of the tile at panel + p * ldb: kPanel for a packed panel, the row stride of a row-major B.
// The tiles continue the sums in `out` (a previous block of k, in order) where `more` is set, else start
// from zero: either way each element gets one FMA per k in ascending order.
template <size_t R>
void tile_f32_portable(const float* const* a, const float* panel, size_t ldb, size_t k, bool more, float* out,
                       size_t ldo) {
  float acc[R][kPanel] = {};
  if (more)
    for (size_t r = 0; r < R; ++r) std::memcpy(acc[r], out + r * ldo, sizeof(acc[r]));
  for (size_t p = 0; p < k; ++p) {
    const float* b = panel + p * ldb;
    for (size_t r = 0; r < R; ++r)
      for (size_t j = 0; j < kPanel; ++j) acc[r][j] = std::fma(a[r][p], b[j], acc[r][j]);  // as the FMA tiles
  }
  for (size_t r = 0; r < R; ++r) std::memcpy(out + r * ldo, acc[r], sizeof(acc[r]));
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

__attribute__((target("avx2,fma"))) void tile6_f32_avx2(const float* const* a, const float* panel, size_t ldb, size_t k,
                                                        bool more, float* out, size_t ldo) {
  __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00;
  __m256 c30 = c00, c31 = c00, c40 = c00, c41 = c00, c50 = c00, c51 = c00;
  if (more) {
    c00 = _mm256_loadu_ps(out), c01 = _mm256_loadu_ps(out + 8), c10 = _mm256_loadu_ps(out + ldo);
    c11 = _mm256_loadu_ps(out + ldo + 8), c20 = _mm256_loadu_ps(out + 2 * ldo), c21 = _mm256_loadu_ps(out + 2 * ldo + 8);
    c30 = _mm256_loadu_ps(out + 3 * ldo), c31 = _mm256_loadu_ps(out + 3 * ldo + 8), c40 = _mm256_loadu_ps(out + 4 * ldo);
    c41 = _mm256_loadu_ps(out + 4 * ldo + 8), c50 = _mm256_loadu_ps(out + 5 * ldo);
    c51 = _mm256_loadu_ps(out + 5 * ldo + 8);
  }
  const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3], *a4 = a[4], *a5 = a[5];
  for (size_t p = 0; p < k; ++p) {
    const __m256 b0 = _mm256_loadu_ps(panel + p * ldb), b1 = _mm256_loadu_ps(panel + p * ldb + 8);
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
  _mm256_storeu_ps(out, c00), _mm256_storeu_ps(out + 8, c01);
  _mm256_storeu_ps(out + ldo, c10), _mm256_storeu_ps(out + ldo + 8, c11);
  _mm256_storeu_ps(out + 2 * ldo, c20), _mm256_storeu_ps(out + 2 * ldo + 8, c21);
  _mm256_storeu_ps(out + 3 * ldo, c30), _mm256_storeu_ps(out + 3 * ldo + 8, c31);
  _mm256_storeu_ps(out + 4 * ldo, c40), _mm256_storeu_ps(out + 4 * ldo + 8, c41);
  _mm256_storeu_ps(out + 5 * ldo, c50), _mm256_storeu_ps(out + 5 * ldo + 8, c51);
}

// ---------------------------------------------------------------- AVX-512 fp32 kernels
// R rows (12, 8 or 4) x 32 columns (two panels; the 1-panel form for an odd last panel): up to 24
// accumulators, two B loads and R broadcasts per k. Every output element gets the same sequence of FMAs
// as in tile6_f32_avx2 (one per k, in order, from 0), so the two paths give identical bits.
// The A rows are addressed as f32_tile_rows.h says.
constexpr size_t kRows512 = 12;

#define SOFTDLA_A_AT(r) \
  (*reinterpret_cast<const float*>(((r) < 6 ? pa : pb) + row_offset<r>(l1, l3, l5)))

// C rows [0, rows) (row stride ldc), the columns the masks keep, = rows of A (row stride lda) x B panels.
template <size_t R>
__attribute__((target("avx512f,fma"), always_inline)) inline void tile2_f32_avx512(
    const float* a, size_t lda, const float* b0, const float* b1, size_t k, float* c, size_t ldc, size_t rows,
    __mmask16 m0, __mmask16 m1) {
  const size_t l1 = lda * sizeof(float), l3 = 3 * l1, l5 = 5 * l1;
  const char* pa = reinterpret_cast<const char*>(a);
  const char* pb = pa + 6 * l1;
#define DECLARE(r) __m512 c##r##0 = _mm512_setzero_ps(), c##r##1 = c##r##0;
  SOFTDLA_F32_ROWS12(DECLARE)
#undef DECLARE
  size_t stream_lines;  // a caller's next A rows, a line a step into L2 (panel_stream.h; Winograd's)
  const char* stream = panel_stream().take(k, stream_lines);
  for (size_t p = 0; p < k; ++p, pa += sizeof(float), pb += sizeof(float)) {
    if (p < stream_lines) _mm_prefetch(stream + kStreamLineBytes * p, _MM_HINT_T1);
    const __m512 x0 = _mm512_loadu_ps(b0 + p * kPanel), x1 = _mm512_loadu_ps(b1 + p * kPanel);
#define STEP(r)                                        \
  if constexpr (r < R) {                               \
    const __m512 w = _mm512_set1_ps(SOFTDLA_A_AT(r));  \
    c##r##0 = _mm512_fmadd_ps(w, x0, c##r##0);         \
    c##r##1 = _mm512_fmadd_ps(w, x1, c##r##1);         \
  }
    SOFTDLA_F32_ROWS12(STEP)
#undef STEP
  }
#define STORE(r)                                                  \
  if constexpr (r < R) {                                          \
    if (r < rows) {                                               \
      _mm512_mask_storeu_ps(c + r * ldc, m0, c##r##0);            \
      _mm512_mask_storeu_ps(c + r * ldc + kPanel, m1, c##r##1);   \
    }                                                             \
  }
  SOFTDLA_F32_ROWS12(STORE)
#undef STORE
}

template <size_t R>
__attribute__((target("avx512f,fma"), always_inline)) inline void tile1_f32_avx512(
    const float* a, size_t lda, const float* b0, size_t k, float* c, size_t ldc, size_t rows, __mmask16 m0) {
  const size_t l1 = lda * sizeof(float), l3 = 3 * l1, l5 = 5 * l1;
  const char* pa = reinterpret_cast<const char*>(a);
  const char* pb = pa + 6 * l1;
#define DECLARE(r) __m512 c##r = _mm512_setzero_ps();
  SOFTDLA_F32_ROWS12(DECLARE)
#undef DECLARE
  for (size_t p = 0; p < k; ++p, pa += sizeof(float), pb += sizeof(float)) {
    const __m512 x0 = _mm512_loadu_ps(b0 + p * kPanel);
#define STEP(r) \
  if constexpr (r < R) c##r = _mm512_fmadd_ps(_mm512_set1_ps(SOFTDLA_A_AT(r)), x0, c##r);
    SOFTDLA_F32_ROWS12(STEP)
#undef STEP
  }
#define STORE(r) \
  if constexpr (r < R) if (r < rows) _mm512_mask_storeu_ps(c + r * ldc, m0, c##r);
  SOFTDLA_F32_ROWS12(STORE)
#undef STORE
}
#undef SOFTDLA_A_AT
#undef SOFTDLA_F32_ROWS12

inline __mmask16 lane_mask(size_t cols) {
  return cols >= kPanel ? __mmask16(0xffff) : __mmask16((1u << cols) - 1);
}

// Out-of-line instances, one per shape, so each keeps its accumulators in registers. b1 null: one panel.
template <size_t R>
__attribute__((target("avx512f,fma"), noinline)) void tile_f32_avx512(const float* a, size_t lda, const float* b0,
                                                                      const float* b1, size_t k, float* c,
                                                                      size_t ldc, size_t rows, size_t cols) {
  if (b1) tile2_f32_avx512<R>(a, lda, b0, b1, k, c, ldc, rows, lane_mask(cols), lane_mask(cols - kPanel));
  else tile1_f32_avx512<R>(a, lda, b0, k, c, ldc, rows, lane_mask(cols));
}

// A rows of this many bytes at most pass over each B panel pair while it stays in L2 (the rows
// themselves stay in L2 too); larger A is taken in slices of rows.
constexpr size_t kABlockBytes = size_t(1) << 20;

__attribute__((target("avx512f,fma"))) void gemm_f32_avx512(const float* a, const float* bp, float* c, size_t m,
                                                            size_t n, size_t k, size_t ldc) {
  const size_t np = panels(n), panel = k * kPanel;
  // The last, short row block reads a copy of its rows padded with zero rows to the kernel's height.
  const size_t full = m / kRows512 * kRows512, tail = m - full;
  thread_local std::vector<float> tail_rows;
  const size_t tail_height = tail > 8 ? 12 : tail > 4 ? 8 : 4;
  if (tail) {
    tail_rows.assign(tail_height * k, 0.f);
    std::memcpy(tail_rows.data(), a + full * k, tail * k * sizeof(float));
  }
  const size_t row_bytes = std::max<size_t>(k, 1) * sizeof(float);
  const size_t slice = std::max(kRows512, kABlockBytes / row_bytes / kRows512 * kRows512);
  // Panels outermost within a slice of rows: a pair of B panels (2 x k x 16 floats) stays in cache
  // while every row block of the slice passes over it.
  for (size_t row0 = 0; row0 < m; row0 += slice) {
    const size_t row1 = std::min(m, row0 + slice);
    for (size_t p = 0; p < np; p += 2) {
      const float* b0 = bp + p * panel;
      const float* b1 = p + 1 < np ? b0 + panel : nullptr;
      const size_t cols = std::min(2 * kPanel, n - p * kPanel);
      for (size_t row = row0; row < row1; row += kRows512) {
        float* out = c + row * ldc + p * kPanel;
        if (row < full) {
          tile_f32_avx512<12>(a + row * k, k, b0, b1, k, out, ldc, kRows512, cols);
        } else if (tail_height == 12) {
          tile_f32_avx512<12>(tail_rows.data(), k, b0, b1, k, out, ldc, tail, cols);
        } else if (tail_height == 8) {
          tile_f32_avx512<8>(tail_rows.data(), k, b0, b1, k, out, ldc, tail, cols);
        } else {
          tile_f32_avx512<4>(tail_rows.data(), k, b0, b1, k, out, ldc, tail, cols);
        }
      }
    }
  }
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

// Six rows x 16 columns of C at out (row stride ldo).
void tile_f32(Isa isa, const float* const* a, const float* panel, size_t ldb, size_t k, bool more, float* out,
              size_t ldo) {
#ifdef SOFTDLA_X86
  if (isa >= Isa::kAvx2 && has_avx2()) return tile6_f32_avx2(a, panel, ldb, k, more, out, ldo);
#else
  (void)isa;
#endif
  tile_f32_portable<kRowsF32>(a, panel, ldb, k, more, out, ldo);
}

// The 6-row tiles over panels of B: panel p at b + p * panel_step, its row q at + q * ldb. K is taken in
// blocks of kGemmBlockK (each element's FMAs stay in k order: a block continues the previous one's sums),
// and within a block row blocks are outermost: a block's six rows of A (12 KiB) stay in L1 while B's
// panels stream from L2 (callers keep a block of B within L2). Without the k blocks, a deep layer's A
// rows and B panel both outgrew L1 (ResNet-50's 3x3 layers: 576 to 4608 deep).
constexpr size_t kBlockK = kGemmBlockK;

void gemm_f32_tiles(Isa isa, const float* a, const float* b, size_t panel_step, size_t ldb, float* c, size_t m,
                    size_t n, size_t k, size_t ldc) {
  thread_local std::vector<float> zero_row;
  zero_row.assign(k, 0.f);
  for (size_t k0 = 0; k0 < k || k0 == 0; k0 += kBlockK) {
    const size_t kc = std::min(kBlockK, k - k0);
    for (size_t row = 0; row < m; row += kRowsF32) {
      const size_t rows = std::min(kRowsF32, m - row);
      const float* a_rows[kRowsF32];
      for (size_t r = 0; r < kRowsF32; ++r) a_rows[r] = (r < rows ? a + (row + r) * k : zero_row.data()) + k0;
      for (size_t p = 0; p < panels(n); ++p) {
        const size_t cols = std::min(kPanel, n - p * kPanel);
        const float* bk = b + p * panel_step + k0 * ldb;
        float* out = c + row * ldc + p * kPanel;
        if (rows == kRowsF32 && cols == kPanel) {  // a whole tile: straight in C
          tile_f32(isa, a_rows, bk, ldb, kc, k0 > 0, out, ldc);
          continue;
        }
        float tile[kRowsF32][kPanel] = {};  // an edge tile, through a copy
        if (k0)
          for (size_t r = 0; r < rows; ++r) std::memcpy(tile[r], out + r * ldc, cols * sizeof(float));
        tile_f32(isa, a_rows, bk, ldb, kc, k0 > 0, tile[0], kPanel);
        for (size_t r = 0; r < rows; ++r) std::memcpy(out + r * ldc, tile[r], cols * sizeof(float));
      }
    }
  }
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
  gemm_f32(active_isa(), a, bp, c, m, n, k, ldc);
}

void gemm_f32(Isa isa, const float* a, const float* bp, float* c, size_t m, size_t n, size_t k, size_t ldc) {
#ifdef SOFTDLA_X86
  // avx512vnni (and every path above it) implies AVX-512F (cpu_isa.cpp checks it), and FMA comes with it.
  if (isa >= Isa::kAvx512Vnni) return gemm_f32_avx512(a, bp, c, m, n, k, ldc);
#endif
  gemm_f32_tiles(isa, a, bp, k * kPanel, kPanel, c, m, n, k, ldc);
}

void gemm_f32_rows(Isa isa, const float* a, const float* b, size_t ldb, float* c, size_t m, size_t n, size_t k,
                   size_t ldc) {
  gemm_f32_tiles(isa, a, b, kPanel, ldb, c, m, n, k, ldc);
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
