// The FP16 epilogue of one output channel on V vectors of fp32 sums in registers: its channel steps
// (bias, scale, PReLU, ReLU, clip), the fused residual add (the result rounded to fp16 first, the other
// input's value added, then the steps after the add), and the fp16 store. Shared by the row epilogue
// (sdp_chain.cpp) and the FP16 convolution tiles that store their results themselves
// (conv_implicit_f32.cpp), so both give the same bits.
#pragma once
#include <cstddef>
#include <cstdint>

#include "channel_step_rows.h"
#include "half_convert_avx512.h"
#include "sdp_chain.h"
#include "sdp_lanes_avx512.h"

namespace softdla::cpu {

#ifdef SOFTDLA_X86
// Every step of a chain of channel steps on V vectors in registers: each step's kind is dispatched and
// its operands broadcast once for all V (a step per vector cost more than the arithmetic).
template <size_t V>
__attribute__((target("avx512f"), always_inline)) inline void apply_steps(const ChannelStep* steps, size_t n,
                                                                        __m512 (&x)[V]) {
  for (size_t j = 0; j < n; ++j) {
    const __m512 k = _mm512_set1_ps(steps[j].operand), vlo = _mm512_set1_ps(steps[j].lo),
                 vhi = _mm512_set1_ps(steps[j].hi);
    step_lanes(steps[j].kind, k, vlo, vhi, x);
  }
}

// x[0 .. vecs) (vecs <= V; vector u's lanes under masks[u]) through before[0 .. n_before) and stored as
// fp16 at out + 16 u; with `other`, rounded to fp16 first, other's values added and taken through
// after[0 .. n_after).
template <size_t V>
__attribute__((target("avx512f,avx512bw,avx512vl,f16c"), always_inline)) inline void steps_to_halves_lanes(
    __m512 (&x)[V], size_t vecs, const __mmask16* masks, const ChannelStep* before, size_t n_before, uint16_t* out,
    const uint16_t* other, const ChannelStep* after, size_t n_after) {
  apply_steps(before, n_before, x);
  // Loops over V unrolled, vectors past `vecs` skipped inside: a run-time bound would put x in memory.
  if (other) {
#pragma GCC unroll 4
    for (size_t u = 0; u < V; ++u) {
      if (u >= vecs) break;
      const __m512 stored = _mm512_cvtph_ps(to_halves_avx512(x[u]));
      const __m256i theirs = _mm256_maskz_loadu_epi16(masks[u], other + 16 * u);
      x[u] = _mm512_add_ps(stored, _mm512_cvtph_ps(theirs));
    }
    apply_steps(after, n_after, x);
  }
#pragma GCC unroll 4
  for (size_t u = 0; u < V; ++u)
    if (u < vecs) store_halves_avx512(x[u], out + 16 * u, masks[u]);
}
// One step of kind K on every row of a register tile: row r's operands broadcast from op[r], lo[r], hi[r]
// (the loads a kind does not use are dropped by the compiler).
template <SdpKind K, size_t kRows, size_t kVecs>
__attribute__((target("avx512f"), always_inline)) inline void step_on_rows(const float* op, const float* lo,
                                                                         const float* hi, __m512 (&c)[kRows][kVecs]) {
#pragma GCC unroll 12
  for (size_t r = 0; r < kRows; ++r) {
    const __m512 k = _mm512_set1_ps(op[r]), vlo = _mm512_set1_ps(lo[r]), vhi = _mm512_set1_ps(hi[r]);
#pragma GCC unroll 4
    for (size_t v = 0; v < kVecs; ++v) c[r][v] = float_lanes(K, c[r][v], k, vlo, vhi);
  }
}

// A register tile of kRows consecutive channels from k0 through a chain laid out by ChannelStepRows, each
// step's kind dispatched once for the whole tile.
template <size_t kRows, size_t kVecs>
__attribute__((target("avx512f"), always_inline)) inline void apply_step_rows(const ChannelStepRows& s, size_t k0,
                                                                            __m512 (&c)[kRows][kVecs]) {
  for (size_t j = 0; j < s.n_steps; ++j) {
    const float *op = s.operand(j) + k0, *lo = s.lo(j) + k0, *hi = s.hi(j) + k0;
    switch (s.kinds[j]) {
      case SdpKind::kBias: step_on_rows<SdpKind::kBias>(op, lo, hi, c); break;
      case SdpKind::kScale: step_on_rows<SdpKind::kScale>(op, lo, hi, c); break;
      case SdpKind::kPRelu: step_on_rows<SdpKind::kPRelu>(op, lo, hi, c); break;
      case SdpKind::kRelu: step_on_rows<SdpKind::kRelu>(op, lo, hi, c); break;
      default: step_on_rows<SdpKind::kClip>(op, lo, hi, c);
    }
  }
}

// The lanes of vector v (16 values from 16 v) among the first `valid` values of a run.
__attribute__((always_inline)) inline __mmask16 lanes_mask(size_t valid, size_t v) {
  if (valid >= 16 * (v + 1)) return __mmask16(0xFFFF);
  return valid <= 16 * v ? __mmask16(0) : __mmask16((1u << (valid - 16 * v)) - 1);
}

// Where the rows of a register tile go (step_rows_to_halves' Out): row r's vector v at out + r * ld + 16 v,
// every lane (kFull) or those under masks[v]; the residual's other input laid out alike.
template <size_t kVecs, bool kFull>
struct TileRowsOut {
  uint16_t* out;
  const uint16_t* other;
  size_t ld;
  __mmask16 masks[kVecs];

  __attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) __m256i other_at(size_t r, size_t v) const {
    const uint16_t* at = other + r * ld + 16 * v;
    if constexpr (kFull) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(at));
    return _mm256_maskz_loadu_epi16(masks[v], at);
  }
  __attribute__((target("avx512f,avx512bw,avx512vl"), always_inline)) void store(size_t r, size_t v, __m256i h) const {
    uint16_t* at = out + r * ld + 16 * v;
    if constexpr (kFull) _mm256_storeu_si256(reinterpret_cast<__m256i*>(at), h);
    else _mm256_mask_storeu_epi16(at, masks[v], h);
  }
};

// A register tile of kRows consecutive channels from k0 through `before` and stored as fp16 through `out`
// (TileRowsOut, or any type with its other / other_at / store); with out.other, the fused residual add:
// rounded to fp16, other's values added, through `after`. The same float operations per element as
// steps_to_halves_lanes, so the same bits. NaN lanes are looked for once per pair of vectors (a row
// holding one takes the general rule) and the saturation to +-65504 is skipped where the chain ends in a
// clip inside it.
template <size_t kRows, size_t kVecs, class Out>
__attribute__((target("avx512f,avx512bw,avx512vl,f16c"), always_inline)) inline void step_rows_to_halves(
    __m512 (&c)[kRows][kVecs], const ChannelStepRows& before, const ChannelStepRows* after, size_t k0, const Out& out) {
  apply_step_rows(before, k0, c);
  if (out.other) {
#pragma GCC unroll 12
    for (size_t r = 0; r < kRows; ++r)
#pragma GCC unroll 4
      for (size_t v = 0; v < kVecs; ++v)
        c[r][v] = _mm512_add_ps(_mm512_cvtph_ps(to_halves_avx512(c[r][v])), _mm512_cvtph_ps(out.other_at(r, v)));
    apply_step_rows(*after, k0, c);
  }
  const bool bounded = out.other ? after->bounded : before.bounded;
  const __m512 top = _mm512_set1_ps(65504.f), bottom = _mm512_set1_ps(-65504.f);
#pragma GCC unroll 12
  for (size_t r = 0; r < kRows; ++r) {
    __mmask16 nan = 0;
#pragma GCC unroll 4
    for (size_t v = 0; v < kVecs; v += 2)
      nan |= _mm512_cmp_ps_mask(c[r][v], c[r][v + 1 < kVecs ? v + 1 : v], _CMP_UNORD_Q);
    if (__builtin_expect(nan != 0, 0)) {
#pragma GCC unroll 4
      for (size_t v = 0; v < kVecs; ++v) out.store(r, v, to_halves_avx512(c[r][v]));
      continue;
    }
#pragma GCC unroll 4
    for (size_t v = 0; v < kVecs; ++v) {
      const __m512 x = bounded ? c[r][v] : _mm512_max_ps(bottom, _mm512_min_ps(top, c[r][v]));
      out.store(r, v, _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
    }
  }
}
// kRows rows of a block of sums (block_rows_to_halves) from its row r.
template <size_t kRows, size_t kVecs>
__attribute__((target("avx512f,avx512bw,avx512vl,f16c"), always_inline)) inline void block_rows_group(
    const float* sums, size_t sums_ld, size_t r, const __mmask16 (&masks)[kVecs], bool full, size_t k0, uint16_t* out,
    const uint16_t* other, size_t ld, const ChannelStepRows& before, const ChannelStepRows* after) {
  __m512 c[kRows][kVecs];
#pragma GCC unroll 8
  for (size_t i = 0; i < kRows; ++i)
#pragma GCC unroll 4
    for (size_t v = 0; v < kVecs; ++v) c[i][v] = _mm512_maskz_loadu_ps(masks[v], sums + (r + i) * sums_ld + 16 * v);
  uint16_t* o = out + r * ld;
  const uint16_t* t = other ? other + r * ld : nullptr;
  if (full) return step_rows_to_halves(c, before, after, k0 + r, TileRowsOut<kVecs, true>{o, t, ld, {}});
  TileRowsOut<kVecs, false> partial{o, t, ld, {}};
  for (size_t v = 0; v < kVecs; ++v) partial.masks[v] = masks[v];
  step_rows_to_halves(c, before, after, k0 + r, partial);
}

// Rows [0, rows) of a block of sums (row r at sums + r * sums_ld is channel k0 + r, kVecs vectors of which
// the first `width` values are stored) through the step-major chain and stored as fp16 at out + r * ld
// (with `other`, the fused residual add), in groups of 16 / kVecs rows: the blocks' epilogue of the AMX
// and Winograd kernels (half_output.h's emit_runs_f16), which spent a call and a dispatch per row and
// step on two vectors of work. Not inlined: its callers are compiled for any ISA.
template <size_t kVecs>
__attribute__((target("avx512f,avx512bw,avx512vl,f16c"), noinline)) void block_rows_to_halves(
    const float* sums, size_t sums_ld, size_t rows, size_t width, size_t k0, uint16_t* out, const uint16_t* other,
    size_t ld, const ChannelStepRows& before, const ChannelStepRows* after) {
  constexpr size_t kGroup = 16 / kVecs;
  __mmask16 masks[kVecs];
  for (size_t v = 0; v < kVecs; ++v) masks[v] = lanes_mask(width, v);
  const bool full = width == 16 * kVecs;
  size_t r = 0;
  for (; r + kGroup <= rows; r += kGroup)
    block_rows_group<kGroup>(sums, sums_ld, r, masks, full, k0, out, other, ld, before, after);
  for (; r < rows; ++r) block_rows_group<1>(sums, sums_ld, r, masks, full, k0, out, other, ld, before, after);
}
#endif

}  // namespace softdla::cpu
