#include "int8_pack.h"

#include <algorithm>
#include <cstring>

#include "x86_simd.h"

#include "cpu_isa.h"
#include "gemm.h"
#include "gemm_vnni.h"

namespace softdla::cpu {
namespace {

// One panel: 16 columns of four rows (each pointer to 16 readable bytes) into 64 bytes of quads.
inline void interleave16(const int8_t* r0, const int8_t* r1, const int8_t* r2, const int8_t* r3, uint8_t* out) {
#ifdef SOFTDLA_X86
  const __m128i flip = _mm_set1_epi8(char(0x80));  // x + 128 = x ^ 0x80 on the byte
  const __m128i a = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r0)), flip);
  const __m128i b = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r1)), flip);
  const __m128i c = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r2)), flip);
  const __m128i d = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(r3)), flip);
  const __m128i ab_lo = _mm_unpacklo_epi8(a, b), ab_hi = _mm_unpackhi_epi8(a, b);
  const __m128i cd_lo = _mm_unpacklo_epi8(c, d), cd_hi = _mm_unpackhi_epi8(c, d);
  __m128i* o = reinterpret_cast<__m128i*>(out);
  _mm_storeu_si128(o + 0, _mm_unpacklo_epi16(ab_lo, cd_lo));
  _mm_storeu_si128(o + 1, _mm_unpackhi_epi16(ab_lo, cd_lo));
  _mm_storeu_si128(o + 2, _mm_unpacklo_epi16(ab_hi, cd_hi));
  _mm_storeu_si128(o + 3, _mm_unpackhi_epi16(ab_hi, cd_hi));
#else
  const int8_t* r[4] = {r0, r1, r2, r3};
  for (size_t j = 0; j < 16; ++j)
    for (size_t i = 0; i < 4; ++i) out[j * 4 + i] = uint8_t(r[i][j]) ^ 0x80u;
#endif
}

#ifdef SOFTDLA_X86
// Four panels at once (64 columns of four rows, each pointer to 64 readable bytes): the byte and word
// interleaves leave lane l of the four results holding columns 16 l + 4 i .. of panel l, and a 4 x 4
// transpose of the 128-bit lanes makes each result one panel's 64 bytes, stored `step` bytes apart.
__attribute__((target("avx512f,avx512bw"))) void interleave64(const int8_t* r0, const int8_t* r1, const int8_t* r2,
                                                               const int8_t* r3, uint8_t* out, size_t step) {
  const __m512i flip = _mm512_set1_epi8(char(0x80));
  const __m512i a = _mm512_loadu_si512(r0), b = _mm512_loadu_si512(r1);
  const __m512i c = _mm512_loadu_si512(r2), d = _mm512_loadu_si512(r3);
  const __m512i ab_lo = _mm512_unpacklo_epi8(a, b), ab_hi = _mm512_unpackhi_epi8(a, b);
  const __m512i cd_lo = _mm512_unpacklo_epi8(c, d), cd_hi = _mm512_unpackhi_epi8(c, d);
  const __m512i t0 = _mm512_unpacklo_epi16(ab_lo, cd_lo), t1 = _mm512_unpackhi_epi16(ab_lo, cd_lo);
  const __m512i t2 = _mm512_unpacklo_epi16(ab_hi, cd_hi), t3 = _mm512_unpackhi_epi16(ab_hi, cd_hi);
  // Lanes (l0 of t0, l0 of t1, l1 of t0, l1 of t1) and so on, then pairs of those into whole panels.
  const __m512i u0 = _mm512_shuffle_i64x2(t0, t1, 0x44), u1 = _mm512_shuffle_i64x2(t0, t1, 0xEE);
  const __m512i u2 = _mm512_shuffle_i64x2(t2, t3, 0x44), u3 = _mm512_shuffle_i64x2(t2, t3, 0xEE);
  _mm512_storeu_si512(out, _mm512_xor_si512(_mm512_shuffle_i64x2(u0, u2, 0x88), flip));
  _mm512_storeu_si512(out + step, _mm512_xor_si512(_mm512_shuffle_i64x2(u0, u2, 0xDD), flip));
  _mm512_storeu_si512(out + 2 * step, _mm512_xor_si512(_mm512_shuffle_i64x2(u1, u3, 0x88), flip));
  _mm512_storeu_si512(out + 3 * step, _mm512_xor_si512(_mm512_shuffle_i64x2(u1, u3, 0xDD), flip));
}

// pack_quads' whole groups of four panels on AVX-512; returns the panels done.
__attribute__((target("avx512f,avx512bw"))) size_t pack_quads_avx512(const int8_t* rows, size_t ld, size_t kdim,
                                                                     size_t cols, uint8_t* out) {
  static const int8_t kZeros[64] = {};
  const size_t kq = k_quads(kdim), groups = cols / (4 * kPanel), step = kq * kPanel * 4;
  for (size_t g = 0; g < groups; ++g) {
    const size_t j0 = g * 4 * kPanel;
    // The rows' line two ahead, as in pack_quads (written out in both loops: moved into a shared inline
    // helper, GCC 12 dropped the prefetches).
    if (j0 + 3 * 64 <= cols)
      for (size_t k = 0; k < kdim; ++k) __builtin_prefetch(rows + k * ld + j0 + 128);
    uint8_t* dst = out + 4 * g * step;
    for (size_t q = 0; q < kq; ++q, dst += kPanel * 4) {
      const int8_t* r[4];
      for (size_t i = 0; i < 4; ++i) r[i] = 4 * q + i < kdim ? rows + (4 * q + i) * ld + j0 : kZeros;
      interleave64(r[0], r[1], r[2], r[3], dst, step);
    }
  }
  return 4 * groups;
}
#endif

}  // namespace

void pack_quads(const int8_t* rows, size_t ld, size_t kdim, size_t cols, uint8_t* out) {
  static const int8_t kZeros[16] = {};
  const size_t kq = k_quads(kdim), np = panels(cols), full = cols / kPanel;
  alignas(16) int8_t tail[4][16];
  size_t first = 0;
#ifdef SOFTDLA_X86
  if (has_avx512(active_isa())) first = pack_quads_avx512(rows, ld, kdim, cols, out);
#endif
  for (size_t p = first; p < np; ++p) {
    uint8_t* dst = out + p * kq * kPanel * 4;
    const size_t j0 = p * kPanel;
    // Every row is its own stream, too many for the hardware prefetcher: each panel that starts a cache
    // line of the rows fetches the rows' line two ahead.
    if (p % 4 == 0 && j0 + 3 * 64 <= cols)
      for (size_t k = 0; k < kdim; ++k) __builtin_prefetch(rows + k * ld + j0 + 128);
    for (size_t q = 0; q < kq; ++q, dst += kPanel * 4) {
      const int8_t* r[4];
      for (size_t i = 0; i < 4; ++i) {
        const size_t k = 4 * q + i;
        if (k >= kdim) r[i] = kZeros;
        else if (p < full) r[i] = rows + k * ld + j0;
        else {  // the last, partial panel: never read past the row's `cols` values
          std::memset(tail[i], 0, 16);
          std::memcpy(tail[i], rows + k * ld + j0, cols - j0);
          r[i] = tail[i];
        }
      }
      interleave16(r[0], r[1], r[2], r[3], dst);
    }
  }
}

}  // namespace softdla::cpu
