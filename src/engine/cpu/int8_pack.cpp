#include "int8_pack.h"

#include <algorithm>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define SOFTDLA_X86 1
// GCC 12's AVX-512 headers pass _mm512_undefined_epi32() as the unused merge source of unmasked
// intrinsics, which -Wmaybe-uninitialized reports at every call site (a false positive).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

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

inline int8_t sat8_32(int32_t v) { return int8_t(std::clamp(v, -128, 127)); }

void requantize_portable(const int32_t* acc, const num::RequantWindow& w, int8_t* out, size_t count) {
  if (w.shifts & num::RequantWindow::kNonNegative) {
    for (size_t i = 0; i < count; ++i) out[i] = sat8_32(num::requant_window_nonnegative(acc[i], w));
  } else {
    for (size_t i = 0; i < count; ++i) out[i] = sat8_32(num::requant_window_value(acc[i], w));
  }
}

#ifdef SOFTDLA_X86
// The window arithmetic on 64-bit lanes: p = clamp(acc) * m + bias_mult (+ half + sign), then the
// word the result lives in: p >> min(s, 32) (logical: the low 32 bits are the same as arithmetic's for
// shifts up to 32), then an arithmetic shift by what is left past 32 (shift_to_word).
__attribute__((target("avx512f,avx512bw"), always_inline)) inline __m512i word512(__m512i p, __m512i half, __m128i s1,
                                                                                bool nonnegative) {
  // rshift_rhaz's rounding: + half, - 1 when p is negative.
  if (!nonnegative) p = _mm512_add_epi64(_mm512_add_epi64(p, half), _mm512_srai_epi64(p, 63));
  return _mm512_srl_epi64(p, s1);
}

__attribute__((target("avx512f,avx512bw"))) void requantize_avx512(const int32_t* acc, const num::RequantWindow& w,
                                                                   int8_t* out, size_t count) {
  const bool nonnegative = w.shifts & num::RequantWindow::kNonNegative;
  const __m512i lo = _mm512_set1_epi32(w.lo), hi = _mm512_set1_epi32(w.hi), m = _mm512_set1_epi64(w.mult);
  const __m512i add = _mm512_set1_epi64(w.bias_mult), half = _mm512_set1_epi64(w.half);
  const __m128i s1 = _mm_cvtsi32_si128(int(std::min(w.shifts & 255u, 32u)));
  const __m128i s2 = _mm_cvtsi32_si128(int((w.shifts >> 8) & 255u));
  size_t i = 0;
  for (; i + 16 <= count; i += 16) {
    __m512i a = _mm512_loadu_si512(acc + i);
    a = _mm512_min_epi32(_mm512_max_epi32(a, lo), hi);
    // Even lanes' products, then odd lanes' (vpmuldq reads the low 32 bits of each 64-bit lane, signed).
    const __m512i pe = _mm512_add_epi64(_mm512_mul_epi32(a, m), add);
    const __m512i po = _mm512_add_epi64(_mm512_mul_epi32(_mm512_srli_epi64(a, 32), m), add);
    const __m512i we = word512(pe, half, s1, nonnegative), wo = word512(po, half, s1, nonnegative);
    __m512i r = _mm512_mask_blend_epi32(0xAAAA, we, _mm512_slli_epi64(wo, 32));
    r = _mm512_sra_epi32(r, s2);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), _mm512_cvtsepi32_epi8(r));
  }
  requantize_portable(acc + i, w, out + i, count - i);
}

__attribute__((target("avx2"), always_inline)) inline __m256i word256(__m256i p, __m256i half, __m256i zero, __m128i s1,
                                                                     bool nonnegative) {
  // The same; AVX2 has no 64-bit arithmetic shift, so the sign comes from a compare.
  if (!nonnegative) p = _mm256_add_epi64(_mm256_add_epi64(p, half), _mm256_cmpgt_epi64(zero, p));
  return _mm256_srl_epi64(p, s1);
}

__attribute__((target("avx2"))) void requantize_avx2(const int32_t* acc, const num::RequantWindow& w, int8_t* out,
                                                     size_t count) {
  const bool nonnegative = w.shifts & num::RequantWindow::kNonNegative;
  const __m256i lo = _mm256_set1_epi32(w.lo), hi = _mm256_set1_epi32(w.hi), m = _mm256_set1_epi64x(w.mult);
  const __m256i add = _mm256_set1_epi64x(w.bias_mult), half = _mm256_set1_epi64x(w.half);
  const __m256i zero = _mm256_setzero_si256();
  const __m128i s1 = _mm_cvtsi32_si128(int(std::min(w.shifts & 255u, 32u)));
  const __m128i s2 = _mm_cvtsi32_si128(int((w.shifts >> 8) & 255u));
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + i));
    a = _mm256_min_epi32(_mm256_max_epi32(a, lo), hi);
    const __m256i pe = _mm256_add_epi64(_mm256_mul_epi32(a, m), add);
    const __m256i po = _mm256_add_epi64(_mm256_mul_epi32(_mm256_srli_epi64(a, 32), m), add);
    const __m256i we = word256(pe, half, zero, s1, nonnegative), wo = word256(po, half, zero, s1, nonnegative);
    __m256i r = _mm256_blend_epi32(we, _mm256_slli_epi64(wo, 32), 0xAA);
    r = _mm256_sra_epi32(r, s2);
    // int32 -> int8 with signed saturation: two packs, then the lanes back in order.
    const __m128i r16 = _mm_packs_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + i), _mm_packs_epi16(r16, r16));
  }
  requantize_portable(acc + i, w, out + i, count - i);
}
#endif

}  // namespace

void pack_quads(const int8_t* rows, size_t ld, size_t kdim, size_t cols, uint8_t* out) {
  static const int8_t kZeros[16] = {};
  const size_t kq = k_quads(kdim), np = panels(cols), full = cols / kPanel;
  alignas(16) int8_t tail[4][16];
  for (size_t p = 0; p < np; ++p) {
    uint8_t* dst = out + p * kq * kPanel * 4;
    const size_t j0 = p * kPanel;
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

void requantize_window(Isa isa, const int32_t* acc, const num::RequantWindow& w, int8_t* out, size_t count) {
#ifdef SOFTDLA_X86
  if (isa == Isa::kAvx512Vnni) return requantize_avx512(acc, w, out, count);
  if (isa >= Isa::kAvx2) return requantize_avx2(acc, w, out, count);
#endif
  (void)isa;
  requantize_portable(acc, w, out, count);
}

}  // namespace softdla::cpu
