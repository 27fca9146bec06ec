#include "conv_winograd.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "aligned_vector.h"
#include "cpu_isa.h"
#include "gemm.h"
#include "half_convert.h"
#include "implicit_grid.h"
#include "panel_stream.h"
#include "x86_simd.h"

namespace softdla::cpu {
namespace {

constexpr size_t kLanes = 16;                // grid tiles a vector of the transforms holds
constexpr size_t kUnitTiles = 2 * kLanes;    // grid tiles a work unit: two 16-column GEMM panels
constexpr size_t kRowBlock = 24;             // output channels per GEMM call
constexpr size_t kThreadUnits = 4;           // work units a thread at least, where the pool has several
constexpr size_t kStageWidth = 4 * kLanes * 2;  // a unit's two output rows of 2 x 32 values, as one row

// The transforms are additions only, in one fixed order per element, written three times (plain C++ for
// the portable path, AVX2, AVX-512): every path gives the same bits.

// B^T d B for 16 grid tiles of one channel: src[i] points at patch row i of the first tile (tile l's
// row i starts 2 l further). Writes position xi = 4 i + j to v + xi * stride.
void input_transform_portable(const float* const* src, float* v, size_t stride) {
  for (size_t l = 0; l < kLanes; ++l) {
    float d[4][4], t[4][4];
    for (size_t i = 0; i < 4; ++i)
      for (size_t j = 0; j < 4; ++j) d[i][j] = src[i][2 * l + j];
    for (size_t j = 0; j < 4; ++j) {
      t[0][j] = d[0][j] - d[2][j];
      t[1][j] = d[1][j] + d[2][j];
      t[2][j] = d[2][j] - d[1][j];
      t[3][j] = d[1][j] - d[3][j];
    }
    for (size_t i = 0; i < 4; ++i) {
      v[(4 * i + 0) * stride + l] = t[i][0] - t[i][2];
      v[(4 * i + 1) * stride + l] = t[i][1] + t[i][2];
      v[(4 * i + 2) * stride + l] = t[i][2] - t[i][1];
      v[(4 * i + 3) * stride + l] = t[i][1] - t[i][3];
    }
  }
}

// A^T M A for `rows` output channels x 32 grid tiles: m holds position xi's sums at m + xi * xi_stride
// (rows of 32); writes each channel's two output rows interleaved into y (row 0 at [0, 64), row 1 at
// [64, 128) of each kStageWidth row: tile l's outputs at 2 l and 2 l + 1).
void output_transform_portable(const float* m, size_t xi_stride, size_t rows, float* y) {
  for (size_t r = 0; r < rows; ++r) {
    const float* mr = m + r * kUnitTiles;
    float* yr = y + r * kStageWidth;
    for (size_t l = 0; l < kUnitTiles; ++l) {
      float s[2][4];
      for (size_t j = 0; j < 4; ++j) {
        const float m0 = mr[j * xi_stride + l], m1 = mr[(4 + j) * xi_stride + l];
        const float m2 = mr[(8 + j) * xi_stride + l], m3 = mr[(12 + j) * xi_stride + l];
        s[0][j] = (m0 + m1) + m2;
        s[1][j] = (m1 - m2) - m3;
      }
      for (size_t a = 0; a < 2; ++a) {
        yr[a * 2 * kUnitTiles + 2 * l] = (s[a][0] + s[a][1]) + s[a][2];
        yr[a * 2 * kUnitTiles + 2 * l + 1] = (s[a][1] - s[a][2]) - s[a][3];
      }
    }
  }
}

#ifdef SOFTDLA_X86
// The same on 16 lanes: each patch row's four columns are the even and odd elements of two 32-float
// loads (at the tiles' first column and two further), picked with one two-source permute each.
__attribute__((target("avx512f"))) void input_transform_avx512(const float* const* src, float* v, size_t stride) {
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  __m512 d[4][4];
  for (size_t i = 0; i < 4; ++i) {
    const __m512 a0 = _mm512_loadu_ps(src[i]), a1 = _mm512_loadu_ps(src[i] + 16);
    const __m512 b0 = _mm512_loadu_ps(src[i] + 2), b1 = _mm512_loadu_ps(src[i] + 18);
    d[i][0] = _mm512_permutex2var_ps(a0, even, a1), d[i][1] = _mm512_permutex2var_ps(a0, odd, a1);
    d[i][2] = _mm512_permutex2var_ps(b0, even, b1), d[i][3] = _mm512_permutex2var_ps(b0, odd, b1);
  }
  for (size_t i = 0; i < 4; ++i) {
    __m512 t[4];
    for (size_t j = 0; j < 4; ++j) {
      const __m512 d0 = d[0][j], d1 = d[1][j], d2 = d[2][j], d3 = d[3][j];
      t[j] = i == 0 ? _mm512_sub_ps(d0, d2) : i == 1 ? _mm512_add_ps(d1, d2) : i == 2 ? _mm512_sub_ps(d2, d1)
                                                                                      : _mm512_sub_ps(d1, d3);
    }
    _mm512_storeu_ps(v + (4 * i + 0) * stride, _mm512_sub_ps(t[0], t[2]));
    _mm512_storeu_ps(v + (4 * i + 1) * stride, _mm512_add_ps(t[1], t[2]));
    _mm512_storeu_ps(v + (4 * i + 2) * stride, _mm512_sub_ps(t[2], t[1]));
    _mm512_storeu_ps(v + (4 * i + 3) * stride, _mm512_sub_ps(t[1], t[3]));
  }
}

// Two output rows of 16 tiles (a0, a1: each tile's two values) interleaved into 32 floats.
__attribute__((target("avx512f"), always_inline)) inline void store_pairs_avx512(float* y, __m512 a0, __m512 a1) {
  const __m512i lo = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i hi = _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
  _mm512_storeu_ps(y, _mm512_permutex2var_ps(a0, lo, a1));
  _mm512_storeu_ps(y + 16, _mm512_permutex2var_ps(a0, hi, a1));
}

__attribute__((target("avx512f"))) void output_transform_avx512(const float* m, size_t xi_stride, size_t rows,
                                                                float* y) {
  for (size_t r = 0; r < rows; ++r)
    for (size_t q = 0; q < kUnitTiles; q += kLanes) {
      const float* mr = m + r * kUnitTiles + q;
      __m512 s[2][4];
      for (size_t j = 0; j < 4; ++j) {
        const __m512 m0 = _mm512_loadu_ps(mr + j * xi_stride), m1 = _mm512_loadu_ps(mr + (4 + j) * xi_stride);
        const __m512 m2 = _mm512_loadu_ps(mr + (8 + j) * xi_stride), m3 = _mm512_loadu_ps(mr + (12 + j) * xi_stride);
        s[0][j] = _mm512_add_ps(_mm512_add_ps(m0, m1), m2);
        s[1][j] = _mm512_sub_ps(_mm512_sub_ps(m1, m2), m3);
      }
      float* yr = y + r * kStageWidth + 2 * q;
      for (size_t a = 0; a < 2; ++a)
        store_pairs_avx512(yr + a * 2 * kUnitTiles, _mm512_add_ps(_mm512_add_ps(s[a][0], s[a][1]), s[a][2]),
                           _mm512_sub_ps(_mm512_sub_ps(s[a][1], s[a][2]), s[a][3]));
    }
}

// AVX2: the 16 tiles as two halves of 8; even and odd elements of 16 floats by an in-lane shuffle and a
// cross-lane permute.
__attribute__((target("avx2"), always_inline)) inline void split_avx2(const float* p, __m256& even, __m256& odd) {
  const __m256 a = _mm256_loadu_ps(p), b = _mm256_loadu_ps(p + 8);
  even = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0x88)), 0xD8));
  odd = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(a, b, 0xDD)), 0xD8));
}

__attribute__((target("avx2"))) void input_transform_avx2(const float* const* src, float* v, size_t stride) {
  for (size_t h = 0; h < kLanes; h += 8) {
    __m256 d[4][4];
    for (size_t i = 0; i < 4; ++i) {
      split_avx2(src[i] + 2 * h, d[i][0], d[i][1]);
      split_avx2(src[i] + 2 * h + 2, d[i][2], d[i][3]);
    }
    for (size_t i = 0; i < 4; ++i) {
      __m256 t[4];
      for (size_t j = 0; j < 4; ++j) {
        const __m256 d0 = d[0][j], d1 = d[1][j], d2 = d[2][j], d3 = d[3][j];
        t[j] = i == 0 ? _mm256_sub_ps(d0, d2) : i == 1 ? _mm256_add_ps(d1, d2) : i == 2 ? _mm256_sub_ps(d2, d1)
                                                                                        : _mm256_sub_ps(d1, d3);
      }
      _mm256_storeu_ps(v + (4 * i + 0) * stride + h, _mm256_sub_ps(t[0], t[2]));
      _mm256_storeu_ps(v + (4 * i + 1) * stride + h, _mm256_add_ps(t[1], t[2]));
      _mm256_storeu_ps(v + (4 * i + 2) * stride + h, _mm256_sub_ps(t[2], t[1]));
      _mm256_storeu_ps(v + (4 * i + 3) * stride + h, _mm256_sub_ps(t[1], t[3]));
    }
  }
}

__attribute__((target("avx2"))) void output_transform_avx2(const float* m, size_t xi_stride, size_t rows, float* y) {
  for (size_t r = 0; r < rows; ++r)
    for (size_t q = 0; q < kUnitTiles; q += 8) {
      const float* mr = m + r * kUnitTiles + q;
      __m256 s[2][4];
      for (size_t j = 0; j < 4; ++j) {
        const __m256 m0 = _mm256_loadu_ps(mr + j * xi_stride), m1 = _mm256_loadu_ps(mr + (4 + j) * xi_stride);
        const __m256 m2 = _mm256_loadu_ps(mr + (8 + j) * xi_stride), m3 = _mm256_loadu_ps(mr + (12 + j) * xi_stride);
        s[0][j] = _mm256_add_ps(_mm256_add_ps(m0, m1), m2);
        s[1][j] = _mm256_sub_ps(_mm256_sub_ps(m1, m2), m3);
      }
      float* yr = y + r * kStageWidth + 2 * q;
      for (size_t a = 0; a < 2; ++a) {
        const __m256 y0 = _mm256_add_ps(_mm256_add_ps(s[a][0], s[a][1]), s[a][2]);
        const __m256 y1 = _mm256_sub_ps(_mm256_sub_ps(s[a][1], s[a][2]), s[a][3]);
        const __m256 lo = _mm256_unpacklo_ps(y0, y1), hi = _mm256_unpackhi_ps(y0, y1);
        _mm256_storeu_ps(yr + a * 2 * kUnitTiles, _mm256_permute2f128_ps(lo, hi, 0x20));
        _mm256_storeu_ps(yr + a * 2 * kUnitTiles + 8, _mm256_permute2f128_ps(lo, hi, 0x31));
      }
    }
}
#endif

void input_transform(Isa isa, const float* const* src, float* v, size_t stride) {
#ifdef SOFTDLA_X86
  if (has_avx512(isa)) return input_transform_avx512(src, v, stride);
  if (isa >= Isa::kAvx2) return input_transform_avx2(src, v, stride);
#endif
  input_transform_portable(src, v, stride);
}

void output_transform(Isa isa, const float* m, size_t xi_stride, size_t rows, float* y) {
#ifdef SOFTDLA_X86
  if (has_avx512(isa)) return output_transform_avx512(m, xi_stride, rows, y);
  if (isa >= Isa::kAvx2) return output_transform_avx2(m, xi_stride, rows, y);
#endif
  output_transform_portable(m, xi_stride, rows, y);
}

// Whether n fp16 values hold an infinity or NaN (exponent all ones).
bool any_non_finite(const uint16_t* h, size_t n) {
  uint16_t seen = 0;
  for (size_t i = 0; i < n; ++i) seen |= uint16_t(((h[i] & 0x7c00u) == 0x7c00u) ? 1u : 0u);
  return seen != 0;
}

bool winograd_enabled() {
  static const bool on = [] {
    const char* env = std::getenv("SOFTDLA_WINOGRAD");
    return !(env && std::strcmp(env, "0") == 0);
  }();
  return on;
}

struct UnitScratch {
  std::vector<float> v, m, y;
};

}  // namespace

bool WinogradConvF16::applies(uint32_t r, uint32_t s, uint32_t sh, uint32_t sw, uint32_t dh, uint32_t dw,
                              uint32_t groups, uint32_t oh, uint32_t ow) {
  if (r != 3 || s != 3 || sh != 1 || sw != 1 || dh != 1 || dw != 1 || groups != 1 || !winograd_enabled()) return false;
  const size_t grid = size_t(oh + 1) / 2 * (size_t(ow + 1) / 2 + 1);
  return grid >= 48;
}

bool WinogradConvF16::pays(uint32_t C, uint32_t K, size_t images, Isa isa) {
  return images > 1 || !has_avx512(isa) || 16 * size_t(C) * K * sizeof(float) <= kColdWeightBytes;
}

WinogradConvF16::WinogradConvF16(const WinogradGeometry& g, const float* weights) : g_(g) {
  th_ = (g.OH + 1) / 2, tw_ = (g.OW + 1) / 2, twq_ = tw_ + 1, wp_ = 2 * twq_;
  blocks_ = (th_ * twq_ + kUnitTiles - 1) / kUnitTiles;
  // The last unit's loads reach element 2 (tiles - 16) + Wp + 2 + 31 of a phase plane.
  phase_len_ = std::max((th_ + 1) * wp_, 2 * kUnitTiles * blocks_ + wp_ + 2);
  phase_len_ = (phase_len_ + 15) / 16 * 16;
  // U = G g G^T in double, rounded once to fp32, as [position][K][C] (GEMM rows of C).
  u_.assign(16 * size_t(g.K) * g.C, 0.f);
  for (size_t k = 0; k < g.K; ++k)
    for (size_t c = 0; c < g.C; ++c) {
      const float* w = weights + (k * g.C + c) * 9;
      double gg[4][3];
      for (size_t j = 0; j < 3; ++j) {
        const double a = w[j], b = w[3 + j], e = w[6 + j];
        gg[0][j] = a, gg[1][j] = (a + b + e) / 2, gg[2][j] = (a - b + e) / 2, gg[3][j] = e;
      }
      for (size_t i = 0; i < 4; ++i) {
        const double a = gg[i][0], b = gg[i][1], e = gg[i][2];
        const double row[4] = {a, (a + b + e) / 2, (a - b + e) / 2, e};
        for (size_t j = 0; j < 4; ++j) u_[((4 * i + j) * g.K + k) * g.C + c] = float(row[j]);
      }
    }
}

// Channels [c0, c1) of one image into its phase planes ([c][phase][phase_len_]): padded row p of the
// input (input row p - pt) is row p / 2 of phase p % 2, its columns shifted right by pl, zeros around.
void WinogradConvF16::pack(const uint16_t* x, float* planes, size_t c0, size_t c1) const {
  const size_t hw = size_t(g_.H) * g_.W;
  const size_t cols = std::min<size_t>(g_.W, wp_ > g_.pl ? wp_ - g_.pl : 0);
  for (size_t c = c0; c < c1; ++c) {
    float* p = planes + c * 2 * phase_len_;
    std::fill_n(p, 2 * phase_len_, 0.f);
    for (size_t ih = 0; ih < g_.H; ++ih) {
      const size_t pr = ih + g_.pt, row = pr / 2;
      if (row > th_ || cols == 0) continue;
      halves_to_floats(x + c * hw + ih * g_.W, p + (pr % 2) * phase_len_ + row * wp_ + g_.pl, cols);
    }
  }
}

void WinogradConvF16::unit(const float* planes, uint32_t n, size_t block, size_t k0, size_t k1,
                           const Epilogue& epilogue, const HalfOutput* direct) const {
  thread_local UnitScratch s;
  const Isa isa = active_isa();
  const size_t C = g_.C, K = g_.K, g0 = block * kUnitTiles, panel = C * kLanes, grid = th_ * twq_;
  // Position xi's packed B at xi * xi_stride: two panels and a cache line, so that the 16 stores of a
  // tile group's transform do not all fall in one L1 set (two panels are a multiple of 4 KiB for 64,
  // 128, ... channels).
  const size_t xi_stride = 2 * panel + kLanes;
  s.v.resize(16 * xi_stride);
  s.m.resize(16 * kRowBlock * kUnitTiles);
  s.y.resize(kRowBlock * kStageWidth);
  // The transformed input: position xi as the packed B of a 32-column GEMM (two panels of C x 16).
  for (size_t q = 0; q < 2; ++q)
    for (size_t c = 0; c < C; ++c) {
      const float* p0 = planes + c * 2 * phase_len_;
      const float* src[4];
      for (size_t i = 0; i < 4; ++i) src[i] = p0 + (i % 2) * phase_len_ + (i / 2) * wp_ + 2 * (g0 + q * kLanes);
      input_transform(isa, src, s.v.data() + q * panel + c * kLanes, xi_stride);
    }
  // The output runs of the unit's tiles, in the staging row: each stretch of tiles within one tile row
  // gives a run on output row 2 ty and one on 2 ty + 1 (when inside the output).
  GridRun runs[2 * kUnitTiles];
  size_t n_runs = 0;
  for (size_t g = g0; g < std::min(grid, g0 + kUnitTiles);) {
    const size_t ty = g / twq_, tx = g % twq_;
    if (tx >= tw_) {
      ++g;
      continue;
    }
    const size_t len = std::min({tw_ - tx, g0 + kUnitTiles - g, grid - g});
    const uint32_t count = uint32_t(std::min<size_t>(2 * len, g_.OW - 2 * tx));
    runs[n_runs++] = {uint32_t(2 * (g - g0)), count, 2 * ty * g_.OW + 2 * tx};
    if (2 * ty + 1 < g_.OH) runs[n_runs++] = {uint32_t(2 * kUnitTiles + 2 * (g - g0)), count, (2 * ty + 1) * g_.OW + 2 * tx};
    g += len;
  }
  for (size_t kb = k0; kb < k1; kb += kRowBlock) {
    const size_t rows = std::min(kRowBlock, k1 - kb);
    for (size_t xi = 0; xi < 16; ++xi) {
      // The next GEMM's weight rows (the next position's, or the next row block's first), fetched into L2
      // while this one runs (panel_stream.h): every unit reads all the transformed weights, which outgrow
      // L2 (ResNet-18 and -50 FP16 at batch 8 on the AVX-512 FMA path 0.96-0.98x the time).
      const size_t next_kb = xi + 1 < 16 ? kb : kb + kRowBlock, next_xi = (xi + 1) % 16;
      const size_t next_rows = next_kb < k1 ? std::min(kRowBlock, k1 - next_kb) : 0;
      stream_panel_part(next_rows ? u_.data() + (next_xi * K + next_kb) * C : nullptr, next_rows * C * sizeof(float),
                        0, 1);
      gemm_f32(u_.data() + (xi * K + kb) * C, s.v.data() + xi * xi_stride, s.m.data() + xi * kRowBlock * kUnitTiles,
               rows, kUnitTiles, C, kUnitTiles);
    }
    output_transform(isa, s.m.data(), kRowBlock * kUnitTiles, rows, s.y.data());
    if (direct) {
      emit_runs_f16<kRowBlock, kStageWidth>(s.y.data(), rows, kb, kStageWidth, runs, n_runs, *direct, n);
      continue;
    }
    for (size_t r = 0; r < rows; ++r)
      for (size_t i = 0; i < n_runs; ++i)
        epilogue(n, uint32_t(kb + r), runs[i].hw0, s.y.data() + r * kStageWidth + runs[i].p, runs[i].count);
  }
}

bool WinogradConvF16::run(const uint16_t* x, size_t images, size_t image_stride, ThreadPool& pool,
                          const Epilogue& epilogue, const HalfOutput* direct) const {
  const size_t plane = size_t(g_.H) * g_.W;
  std::atomic<bool> non_finite{false};
  pool.parallel_for(images * g_.C, [&](size_t b, size_t e) {
    for (size_t u = b; u < e && !non_finite.load(std::memory_order_relaxed); ++u)
      if (any_non_finite(x + (u / g_.C) * image_stride + (u % g_.C) * plane, plane)) non_finite = true;
  }, ThreadPool::min_items(plane));
  if (non_finite) return false;
  thread_local AlignedVector<float> planes;  // the calling thread's: the workers get a pointer
  const size_t image_floats = size_t(g_.C) * 2 * phase_len_;
  const size_t group = image_group(image_floats * sizeof(float), images);
  planes.resize(group * image_floats);
  float* data = planes.data();
  // Units: (image, block of tiles), each split over chunks of output channels when there are too few
  // to give every thread kThreadUnits (each chunk transforms the block's input again). Blocks differ in
  // size (a 14 x 14 layer's 56 grid tiles are blocks of 32 and 24), so two units a thread left one thread
  // with 4/7 of the work on two threads (ResNet-50's 14 x 14 layers at batch 1 scaled 1.75-1.78x); one
  // thread keeps whole blocks.
  const size_t row_blocks = (g_.K + kRowBlock - 1) / kRowBlock;
  const size_t want_units = pool.size() > 1 ? kThreadUnits * pool.size() : 1;
  for_each_image_group(
      pool, images, group, g_.C, ThreadPool::min_items(plane),
      [&](size_t n, size_t slot, size_t c0, size_t c1) { pack(x + n * image_stride, data + slot * image_floats, c0, c1); },
      [&](size_t n0, size_t count) {
        const size_t tiles_units = count * blocks_;
        const size_t chunks =
            std::min(row_blocks, std::max<size_t>(1, (want_units + tiles_units - 1) / tiles_units));
        const size_t chunk_rows = (row_blocks + chunks - 1) / chunks * kRowBlock;
        pool.parallel_for(tiles_units * chunks, [&](size_t b, size_t e) {
          const PanelStreamScope stream_scope;
          for (size_t u = b; u < e; ++u) {
            const size_t chunk = u % chunks, tile_unit = u / chunks, n = tile_unit / blocks_;
            const size_t k0 = chunk * chunk_rows, k1 = std::min<size_t>(g_.K, k0 + chunk_rows);
            if (k0 < k1)
              unit(data + n * image_floats, uint32_t(n0 + n), tile_unit % blocks_, k0, k1, epilogue, direct);
          }
        });
      });
  return true;
}

}  // namespace softdla::cpu
