#include "gemv_s8_vnni.h"

#include <algorithm>
#include <cstring>

#include "gemm_vnni.h"
#include "gemv_units.h"
#include "x86_simd.h"

namespace softdla::cpu {
namespace {

// Output channels per unit of work: 8 vectors of 16, independent vpdpbusd chains enough to hide their
// latency with one image.
constexpr size_t kBlock = 128;
// Images sharing each weight load.
constexpr size_t kImages = 3;

#ifdef SOFTDLA_X86
// Output channels [kb, kb + kBlock) of `Images` images: xq[i] their inputs as offset quads (one dword per 4
// input channels), y[i] where their sums go.
template <size_t Images>
__attribute__((target("avx512f,avx512vnni"))) void block_vnni(const int8_t* w, size_t quads,
                                                              const int32_t* start, const uint32_t* const* xq,
                                                              size_t kb, int32_t* const* y) {
  __m512i acc[Images][8];
  for (size_t i = 0; i < Images; ++i)
    for (size_t j = 0; j < 8; ++j) acc[i][j] = _mm512_loadu_si512(start + kb + 16 * j);
  for (size_t q = 0; q < quads; ++q) {
    const int8_t* wq = w + (kb * quads + q * kBlock) * 4;  // GemvS8Vnni::w_'s block of kb, quad q
    __m512i xb[Images];
    for (size_t i = 0; i < Images; ++i) xb[i] = _mm512_set1_epi32(int32_t(xq[i][q]));
    for (size_t j = 0; j < 8; ++j) {
      const __m512i wv = _mm512_loadu_si512(wq + 64 * j);
      for (size_t i = 0; i < Images; ++i) acc[i][j] = _mm512_dpbusd_epi32(acc[i][j], xb[i], wv);
    }
  }
  for (size_t i = 0; i < Images; ++i)
    for (size_t j = 0; j < 8; ++j) _mm512_storeu_si512(y[i] + kb + 16 * j, acc[i][j]);
}

void block_images(size_t count, const int8_t* w, size_t quads, const int32_t* start, const uint32_t* const* xq,
                  size_t kb, int32_t* const* y) {
  if (count == 3) block_vnni<3>(w, quads, start, xq, kb, y);
  else if (count == 2) block_vnni<2>(w, quads, start, xq, kb, y);
  else block_vnni<1>(w, quads, start, xq, kb, y);
}
#endif

}  // namespace

bool GemvS8Vnni::applies(Isa isa, size_t c) {
#ifdef SOFTDLA_X86
  return has_avx512(isa) && c <= kVnniMaxK;
#else
  (void)isa, (void)c;
  return false;
#endif
}

GemvS8Vnni::GemvS8Vnni(const int8_t* weights, size_t k, size_t c) : k_(k), c_(c) {
  kp_ = (k + kBlock - 1) / kBlock * kBlock;
  quads_ = (c + 3) / 4;
  w_.assign(quads_ * kp_ * 4, 0);
  start_.assign(kp_, 0);
  for (size_t kk = 0; kk < k; ++kk) {
    int32_t sum = 0;
    for (size_t ch = 0; ch < c; ++ch) {
      const int8_t v = weights[kk * c + ch];
      w_[((kk / kBlock * quads_ + ch / 4) * kBlock + kk % kBlock) * 4 + ch % 4] = v;
      sum += v;
    }
    start_[kk] = -128 * sum;
  }
}

void GemvS8Vnni::run(const int8_t* x, size_t images, int32_t* sums, ThreadPool& pool) const {
#ifdef SOFTDLA_X86
  // Each image's inputs as unsigned bytes (x + 128) in quads, zeros past C (their weights are zeros).
  thread_local std::vector<uint32_t> xs;
  thread_local std::vector<int32_t> ys;
  xs.assign(images * quads_, 0);
  for (size_t n = 0; n < images; ++n) {
    auto* bytes = reinterpret_cast<uint8_t*>(xs.data() + n * quads_);
    for (size_t ch = 0; ch < c_; ++ch) bytes[ch] = uint8_t(x[n * c_ + ch]) ^ 0x80;
  }
  ys.resize(images * kp_);
  int32_t* yp = ys.data();
  run_gemv_units<kBlock, kImages>(pool, kp_, images, xs.data(), quads_, yp, ThreadPool::min_items(quads_ * kBlock),
                                  [&](size_t count, const uint32_t* const* xi, size_t kb, int32_t* const* yi) {
                                    block_images(count, w_.data(), quads_, start_.data(), xi, kb, yi);
                                  });
  for (size_t n = 0; n < images; ++n) std::copy_n(yp + n * kp_, k_, sums + n * k_);
#else
  (void)x, (void)images, (void)sums, (void)pool;
#endif
}

}  // namespace softdla::cpu
