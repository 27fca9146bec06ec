#include "half_convert.h"

#include "half_convert_avx512.h"
#include "half_convert_f16c.h"
#include "numerics.h"
#include "x86_simd.h"

#ifdef SOFTDLA_X86
#include <cpuid.h>
#endif

namespace softdla::cpu {
namespace {

#ifdef SOFTDLA_X86
bool has_f16c() {
  // CPUID leaf 1, ECX bit 29 (F16C); asked directly because clang's __builtin_cpu_supports has no "f16c".
  static const bool yes = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __builtin_cpu_supports("avx") && __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
  }();
  return yes;
}

__attribute__((target("avx,f16c"))) size_t halves_to_floats_f16c(const uint16_t* in, float* out, size_t i, size_t n) {
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  return i;
}

__attribute__((target("avx,f16c"))) size_t floats_to_halves_f16c(const float* in, uint16_t* out, size_t i, size_t n) {
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), to_halves_f16c(_mm256_loadu_ps(in + i)));
  return i;
}

// The AVX-512 forms take the tail under a mask (runs of 7 to 56 values are common: one output row).
__attribute__((target("avx512f,avx512bw,avx512vl"))) size_t halves_to_floats_avx512(const uint16_t* in, float* out,
                                                                                    size_t n) {
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(out + i, m, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, in + i)));
  }
  return n;
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) size_t floats_to_halves_avx512(const float* in, uint16_t* out,
                                                                                    size_t n) {
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = n - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - i)) - 1);
    store_halves_avx512(_mm512_maskz_loadu_ps(m, in + i), out + i, m);
  }
  return n;
}
#endif

}  // namespace

bool cpu_has_f16c() {
#ifdef SOFTDLA_X86
  return has_f16c();
#else
  return false;
#endif
}

void halves_to_floats(Isa isa, const uint16_t* in, float* out, size_t n) {
  size_t i = 0;
#ifdef SOFTDLA_X86
  if (isa >= Isa::kAvx512Vnni) i = halves_to_floats_avx512(in, out, n);
  if (isa >= Isa::kAvx2 && has_f16c()) i = halves_to_floats_f16c(in, out, i, n);
#else
  (void)isa;
#endif
  for (; i < n; ++i) out[i] = num::half_to_float(in[i]);
}

void floats_to_halves(Isa isa, const float* in, uint16_t* out, size_t n) {
  size_t i = 0;
#ifdef SOFTDLA_X86
  if (isa >= Isa::kAvx512Vnni) i = floats_to_halves_avx512(in, out, n);
  if (isa >= Isa::kAvx2 && has_f16c()) i = floats_to_halves_f16c(in, out, i, n);
#else
  (void)isa;
#endif
  for (; i < n; ++i) out[i] = num::float_to_half(in[i]);
}

void halves_to_floats(const uint16_t* in, float* out, size_t n) { halves_to_floats(active_isa(), in, out, n); }
void floats_to_halves(const float* in, uint16_t* out, size_t n) { floats_to_halves(active_isa(), in, out, n); }

}  // namespace softdla::cpu
