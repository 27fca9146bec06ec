// The FP16 epilogue of one output channel on V vectors of fp32 sums in registers: its channel steps
// (bias, scale, PReLU, ReLU, clip), the fused residual add (the result rounded to fp16 first, the other
// input's value added, then the steps after the add), and the fp16 store. Shared by the row epilogue
// (sdp_chain.cpp) and the FP16 convolution tiles that store their results themselves
// (conv_implicit_f32.cpp), so both give the same bits.
#pragma once
#include <cstddef>
#include <cstdint>

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
#endif

}  // namespace softdla::cpu
