#include "int8_pack.h"

#include <algorithm>
#include <cstring>

#include "x86_simd.h"

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

}  // namespace softdla::cpu
