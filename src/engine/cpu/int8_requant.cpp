#include "int8_requant.h"

#include <algorithm>
#include <cmath>

#include "int8_requant_x86.h"

namespace softdla::cpu {
namespace {

inline int8_t sat8_32(int32_t v) { return int8_t(std::clamp(v, -128, 127)); }

inline int32_t window_value(int32_t a, const num::RequantWindow& w) {
  return w.shifts & num::RequantWindow::kNonNegative ? num::requant_window_nonnegative(a, w)
                                                     : num::requant_window_value(a, w);
}

void requantize_portable(const int32_t* acc, const num::RequantWindow& w, int8_t* out, size_t count) {
  for (size_t i = 0; i < count; ++i) out[i] = sat8_32(window_value(acc[i], w));
}
void requantize_s8_portable(const int8_t* x, const num::RequantWindow& w, int8_t* out, size_t count) {
  for (size_t i = 0; i < count; ++i) out[i] = sat8_32(window_value(x[i], w));
}
template <bool kNonNegative, bool kPlainX>
void residual_loop(const int8_t* x, const int8_t* e, const num::ResidualWindow& w, int8_t* out, size_t count) {
  for (size_t i = 0; i < count; ++i) out[i] = sat8_32(num::residual_window_value<kNonNegative, kPlainX>(x[i], e[i], w));
}
void residual_portable(const int8_t* x, const int8_t* e, const num::ResidualWindow& w, int8_t* out, size_t count) {
  const bool nonnegative = w.out.shifts & num::RequantWindow::kNonNegative, plain = w.x_product != 0;
  if (nonnegative) (plain ? residual_loop<true, true> : residual_loop<true, false>)(x, e, w, out, count);
  else (plain ? residual_loop<false, true> : residual_loop<false, false>)(x, e, w, out, count);
}

void requantize_residual_portable(const int32_t* acc, const num::RequantWindow& w, const int8_t* other,
                                  const ResidualForm& rw, bool conv_second, int8_t* out, size_t count) {
  for (size_t i = 0; i < count; i += 64) {
    int8_t mine[64];
    const size_t n = std::min<size_t>(64, count - i);
    requantize_portable(acc + i, w, mine, n);
    if (conv_second) residual_portable(other + i, mine, rw.w, out + i, n);
    else residual_portable(mine, other + i, rw.w, out + i, n);
  }
}

#ifdef SOFTDLA_X86
__attribute__((target("avx512f,avx512bw,avx512vl"))) void requantize_avx512(const int32_t* acc,
                                                                            const num::RequantWindow& w, int8_t* out,
                                                                            size_t count) {
  const Window512 win(w);
  win.with_form([&](auto form) __attribute__((target("avx512f,avx512bw,avx512vl"))) {
    size_t i = 0;
    for (; i + 64 <= count; i += 64) _mm512_storeu_si512(out + i, form.apply64(acc + i));
    for (; i + 16 <= count; i += 16)
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), form.apply(_mm512_loadu_si512(acc + i)));
    if (i < count) {  // the tail under a mask (short runs are common: one output row of a 7x7 layer)
      const __mmask16 m = __mmask16((1u << (count - i)) - 1);
      _mm_mask_storeu_epi8(out + i, m, form.apply(_mm512_maskz_loadu_epi32(m, acc + i)));
    }
  });
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) void requantize_s8_avx512(const int8_t* x,
                                                                               const num::RequantWindow& w, int8_t* out,
                                                                               size_t count) {
  const Window512 win(w);
  size_t i = 0;
  for (; i + 16 <= count; i += 16)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     win.apply(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)))));
  if (i < count) {
    const __mmask16 m = __mmask16((1u << (count - i)) - 1);
    _mm_mask_storeu_epi8(out + i, m, win.apply(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, x + i))));
  }
}

// The tails under a mask: a residual add fused into a convolution gets one output row at a time (7 to
// 56 values in ResNet-50).
__attribute__((target("avx512f,avx512bw,avx512vl"))) void residual_avx512(const int8_t* x, const int8_t* e,
                                                                          const ResidualForm& w, int8_t* out,
                                                                          size_t count) {
  const Residual512 add(w);
  size_t i = 0;
  for (; i + 16 <= count; i += 16) {
    const __m512i xv = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x + i)));
    const __m512i ev = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(e + i)));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), add.apply(xv, ev));
  }
  if (i < count) {
    const __mmask16 m = __mmask16((1u << (count - i)) - 1);
    const __m512i xv = _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, x + i));
    const __m512i ev = _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, e + i));
    _mm_mask_storeu_epi8(out + i, m, add.apply(xv, ev));
  }
}

// requantize_avx512 then residual_avx512 with the convolution's int8 results kept in registers: lines
// of 64 results (requant_add_64), then 16 at a time. Whole vectors are loaded and stored plainly (masked
// stores are slow on some CPUs: AMD Zen), the tail under a mask.
__attribute__((target("avx512f,avx512bw,avx512vl"))) void requantize_residual_avx512(
    const int32_t* acc, const num::RequantWindow& w, const int8_t* other, const ResidualForm& rw,
    bool conv_second, int8_t* out, size_t count) {
  const Window512 win(w);
  const Residual512 residual(rw);
  residual.with_form(conv_second, [&](const auto& add, auto second)
                                       __attribute__((target("avx512f,avx512bw,avx512vl"))) {
    win.with_form([&](auto form) __attribute__((target("avx512f,avx512bw,avx512vl"))) {
      size_t i = 0;
      for (; i + 64 <= count; i += 64)
        _mm512_storeu_si512(out + i, requant_add_64<decltype(second)::value>(form, add, acc + i, other + i));
      for (; i < count; i += 16) {
        const __mmask16 m = count - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (count - i)) - 1);
        const __m128i v = requant_add_16<decltype(second)::value>(form, add, _mm512_maskz_loadu_epi32(m, acc + i),
                                                                  _mm_maskz_loadu_epi8(m, other + i));
        if (count - i >= 16) _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), v);
        else _mm_mask_storeu_epi8(out + i, m, v);
      }
    });
  });
}

__attribute__((target("avx2"))) inline __m256i load8_s8(const int8_t* p) {
  return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
}

__attribute__((target("avx2"))) void requantize_avx2(const int32_t* acc, const num::RequantWindow& w, int8_t* out,
                                                     size_t count) {
  const Window256 win(w);
  size_t i = 0;
  for (; i + 8 <= count; i += 8)
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + i),
                     win.apply(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + i))));
  requantize_portable(acc + i, w, out + i, count - i);
}

__attribute__((target("avx2"))) void requantize_s8_avx2(const int8_t* x, const num::RequantWindow& w, int8_t* out,
                                                        size_t count) {
  const Window256 win(w);
  size_t i = 0;
  for (; i + 8 <= count; i += 8) _mm_storel_epi64(reinterpret_cast<__m128i*>(out + i), win.apply(load8_s8(x + i)));
  requantize_s8_portable(x + i, w, out + i, count - i);
}

__attribute__((target("avx2"))) void residual_avx2(const int8_t* x, const int8_t* e, const ResidualForm& w,
                                                   int8_t* out, size_t count) {
  const Residual256 add(w);
  size_t i = 0;
  for (; i + 8 <= count; i += 8)
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + i), add.apply(load8_s8(x + i), load8_s8(e + i)));
  if (i < count) {  // the tail through an 8-value staging run (AVX2 has no byte masks)
    int8_t xs[8] = {}, es[8] = {}, os[8];
    std::copy(x + i, x + count, xs), std::copy(e + i, e + count, es);
    residual_avx2(xs, es, w, os, 8);
    std::copy(os, os + (count - i), out + i);
  }
}

__attribute__((target("avx2"))) void requantize_residual_avx2(const int32_t* acc, const num::RequantWindow& w,
                                                              const int8_t* other, const ResidualForm& rw,
                                                              bool conv_second, int8_t* out, size_t count) {
  const Window256 win(w);
  const Residual256 add(rw);
  size_t i = 0;
  for (; i + 8 <= count; i += 8) {
    const __m256i mine = _mm256_cvtepi8_epi32(win.apply(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(acc + i))));
    const __m256i theirs = load8_s8(other + i);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + i), conv_second ? add.apply(theirs, mine) : add.apply(mine, theirs));
  }
  requantize_residual_portable(acc + i, w, other + i, rw, conv_second, out + i, count - i);
}
#endif

}  // namespace

void requantize_window(Isa isa, const int32_t* acc, const num::RequantWindow& w, int8_t* out, size_t count) {
#ifdef SOFTDLA_X86
  if (has_avx512(isa)) return requantize_avx512(acc, w, out, count);
  if (isa >= Isa::kAvx2) return requantize_avx2(acc, w, out, count);
#endif
  (void)isa;
  requantize_portable(acc, w, out, count);
}

void requantize_windows(const int32_t* acc, const num::RequantWindow* windows, int8_t* out, size_t count) {
  for (size_t i = 0; i < count; ++i) out[i] = sat8_32(window_value(acc[i], windows[i]));
}

void requantize_window_s8(Isa isa, const int8_t* x, const num::RequantWindow& w, int8_t* out, size_t count) {
#ifdef SOFTDLA_X86
  if (has_avx512(isa)) return requantize_s8_avx512(x, w, out, count);
  if (isa >= Isa::kAvx2) return requantize_s8_avx2(x, w, out, count);
#endif
  (void)isa;
  requantize_s8_portable(x, w, out, count);
}

void residual_add(Isa isa, const int8_t* x, const int8_t* e, const ResidualForm& w, int8_t* out, size_t count) {
#ifdef SOFTDLA_X86
  if (has_avx512(isa)) return residual_avx512(x, e, w, out, count);
  if (isa >= Isa::kAvx2) return residual_avx2(x, e, w, out, count);
#endif
  (void)isa;
  residual_portable(x, e, w.w, out, count);
}

void requantize_residual(Isa isa, const int32_t* acc, const num::RequantWindow& w, const int8_t* other,
                         const ResidualForm& rw, bool conv_second, int8_t* out, size_t count) {
#ifdef SOFTDLA_X86
  if (has_avx512(isa)) return requantize_residual_avx512(acc, w, other, rw, conv_second, out, count);
  if (isa >= Isa::kAvx2) return requantize_residual_avx2(acc, w, other, rw, conv_second, out, count);
#endif
  (void)isa;
  requantize_residual_portable(acc, w, other, rw, conv_second, out, count);
}

NarrowRescale narrow_rescale(const num::Int8Rescale& r) {
  int32_t want[256];
  for (int v = -128; v < 128; ++v) want[v + 128] = num::int8_rescale_value(v, r);
  const unsigned s = r.shifts & 255u;  // the whole shift (requant_window.h's encode_shift)
  // |v * mult| <= 2^29 and half <= 2^29: their sum stays inside int32.
  constexpr int64_t kMaxMult = int64_t(1) << 22;
  for (unsigned s2 = 29; s2 >= 1; --s2) {
    const double ideal = std::ldexp(double(r.mult), int(s2) - int(s));
    if (std::fabs(ideal) > double(kMaxMult) + 2) continue;
    const int64_t base = int64_t(std::floor(ideal));
    for (int64_t m2 = base - 1; m2 <= base + 2; ++m2) {
      if (m2 > kMaxMult || m2 < -kMaxMult) continue;
      const int32_t half = int32_t(1) << (s2 - 1);
      bool same = true;
      for (int v = -128; v < 128 && same; ++v) {
        const int32_t p = int32_t(v * m2);
        same = ((p + half + (p < 0 ? -1 : 0)) >> s2) == want[v + 128];
      }
      if (same) return {int32_t(m2), half, s2, true};
    }
  }
  return {};
}

ResidualForm residual_form(const num::ResidualWindow& w) {
  ResidualForm f;
  f.w = w;
  f.x = narrow_rescale(w.x);
  f.e = narrow_rescale(w.e);
  f.sum = shared_scale_sum(w);
  return f;
}

}  // namespace softdla::cpu
