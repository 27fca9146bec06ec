#include "gemv_f32.h"

#include <algorithm>
#include <cstring>

#include "gemv_units.h"
#include "half_convert.h"
#include "numerics.h"
#include "x86_simd.h"

namespace softdla::cpu {
namespace {

// Output channels per unit of work: 8 AVX-512 vectors (16 AVX2 ones), enough independent FMA chains
// for one image to keep both FMA units busy.
constexpr size_t kBlock = 128;
// Images sharing each weight load.
constexpr size_t kImages = 3;

#ifdef SOFTDLA_X86
// 16 (AVX-512) or 8 (AVX2) weights as fp32, from fp32 or fp16 storage.
__attribute__((target("avx512f"), always_inline)) inline __m512 load16(const float* w) { return _mm512_loadu_ps(w); }
__attribute__((target("avx512f"), always_inline)) inline __m512 load16(const uint16_t* w) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w)));
}
__attribute__((target("avx2"), always_inline)) inline __m256 load8(const float* w) { return _mm256_loadu_ps(w); }
__attribute__((target("avx2,f16c"), always_inline)) inline __m256 load8(const uint16_t* w) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w)));
}

// Output channels [kb, kb + kBlock) of `images` (1 to kImages) images: x[i] their C inputs (fp32); wt
// the weights in blocks (GemvF32::wt_), this block's at wt + kb * c.
template <size_t Images, class W>
__attribute__((target("avx512f,fma"))) void block_avx512(const W* wt, size_t c, const float* const* x, size_t kb,
                                                         float* const* y) {
  __m512 acc[Images][8];
  for (size_t i = 0; i < Images; ++i)
    for (size_t j = 0; j < 8; ++j) acc[i][j] = _mm512_setzero_ps();
  for (size_t ch = 0; ch < c; ++ch) {
    const W* w = wt + kb * c + ch * kBlock;
    __m512 xb[Images];
    for (size_t i = 0; i < Images; ++i) xb[i] = _mm512_set1_ps(x[i][ch]);
    for (size_t j = 0; j < 8; ++j) {
      const __m512 wv = load16(w + 16 * j);
      for (size_t i = 0; i < Images; ++i) acc[i][j] = _mm512_fmadd_ps(wv, xb[i], acc[i][j]);
    }
  }
  for (size_t i = 0; i < Images; ++i)
    for (size_t j = 0; j < 8; ++j) _mm512_storeu_ps(y[i] + kb + 16 * j, acc[i][j]);
}

template <size_t Images, class W>
__attribute__((target("avx2,fma,f16c"))) void block_avx2(const W* wt, size_t c, const float* const* x,
                                                         size_t kb, float* const* y) {
  // 16 vectors of 8 would outgrow the 16 registers with three images: two passes of 8 vectors.
  for (size_t half = 0; half < kBlock; half += 64) {
    __m256 acc[Images][8];
    for (size_t i = 0; i < Images; ++i)
      for (size_t j = 0; j < 8; ++j) acc[i][j] = _mm256_setzero_ps();
    for (size_t ch = 0; ch < c; ++ch) {
      const W* w = wt + kb * c + ch * kBlock + half;
      __m256 xb[Images];
      for (size_t i = 0; i < Images; ++i) xb[i] = _mm256_set1_ps(x[i][ch]);
      for (size_t j = 0; j < 8; ++j) {
        const __m256 wv = load8(w + 8 * j);
        for (size_t i = 0; i < Images; ++i) acc[i][j] = _mm256_fmadd_ps(wv, xb[i], acc[i][j]);
      }
    }
    for (size_t i = 0; i < Images; ++i)
      for (size_t j = 0; j < 8; ++j) _mm256_storeu_ps(y[i] + kb + half + 8 * j, acc[i][j]);
  }
}

template <size_t Images, class W>
void block(bool avx512, const W* wt, size_t c, const float* const* x, size_t kb, float* const* y) {
  if (avx512) block_avx512<Images>(wt, c, x, kb, y);
  else block_avx2<Images>(wt, c, x, kb, y);
}

template <class W>
void block_images(size_t count, bool avx512, const W* wt, size_t c, const float* const* x, size_t kb,
                  float* const* y) {
  if (count == 3) block<3>(avx512, wt, c, x, kb, y);
  else if (count == 2) block<2>(avx512, wt, c, x, kb, y);
  else block<1>(avx512, wt, c, x, kb, y);
}
#endif

}  // namespace

bool GemvF32::applies(Isa isa) {
#ifdef SOFTDLA_X86
  return isa >= Isa::kAvx2;
#else
  (void)isa;
  return false;
#endif
}

GemvF32::GemvF32(const float* weights, size_t k, size_t c, bool halves) : k_(k), c_(c) {
  kp_ = (k + kBlock - 1) / kBlock * kBlock;
  // The AVX2 kernel reads fp16 with F16C (every AVX2 CPU has it; asked all the same).
  const Isa isa = active_isa();
  const bool keep_halves = halves && (has_avx512(isa) || (isa >= Isa::kAvx2 && cpu_has_f16c()));
  if (keep_halves) wh_.assign(c * kp_, 0);
  else wt_.assign(c * kp_, 0.f);
  for (size_t kk = 0; kk < k; ++kk)
    for (size_t ch = 0; ch < c; ++ch) {
      const float v = weights[kk * c + ch];
      const size_t at = (kk / kBlock * c + ch) * kBlock + kk % kBlock;
      if (keep_halves) wh_[at] = num::float_to_half(v);  // exact: v is an fp16 value
      else wt_[at] = v;
    }
}

void GemvF32::run(const void* x, bool halves, size_t images, float* y, ThreadPool& pool) const {
#ifdef SOFTDLA_X86
  // The inputs as fp32 (exact from fp16), and outputs with room for whole blocks past K.
  thread_local std::vector<float> xs, ys;
  xs.resize(images * c_);
  if (halves) halves_to_floats(static_cast<const uint16_t*>(x), xs.data(), images * c_);
  else std::memcpy(xs.data(), x, images * c_ * sizeof(float));
  ys.resize(images * kp_);
  const bool avx512 = has_avx512(active_isa());
  float* yp = ys.data();
  run_gemv_units<kBlock, kImages>(pool, kp_, images, xs.data(), c_, yp, ThreadPool::min_items(c_ * kBlock),
                                  [&](size_t count, const float* const* xi, size_t kb, float* const* yi) {
                                    if (!wh_.empty()) block_images(count, avx512, wh_.data(), c_, xi, kb, yi);
                                    else block_images(count, avx512, wt_.data(), c_, xi, kb, yi);
                                  });
  for (size_t n = 0; n < images; ++n) std::copy_n(yp + n * kp_, k_, y + n * k_);
#else
  (void)x, (void)halves, (void)images, (void)y, (void)pool;
#endif
}

}  // namespace softdla::cpu
