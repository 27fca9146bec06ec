// x86 SIMD intrinsics for the CPU kernels; SOFTDLA_X86 is defined where they are available.
#pragma once
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define SOFTDLA_X86 1
// GCC 12's AVX-512 headers pass _mm512_undefined_epi32() as the unused merge source of unmasked
// intrinsics, which -Wmaybe-uninitialized (and, once inlined into a loop, -Wuninitialized) then
// reports at every call site: a false positive. Clang has no such warning (nor the group).
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#endif

#ifdef SOFTDLA_X86
#include <cstddef>
#include <cstdint>
namespace softdla::cpu {
// The lines of the first and the last of `count` (>= 1) consecutive halves from p, fetched into L1: a run
// of up to 64 bytes, which may straddle two lines. For the kernels that read one run from each of many
// planes, more streams than the hardware prefetchers follow.
inline void prefetch_run_ends(const uint16_t* p, size_t count) {
  _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0);
  _mm_prefetch(reinterpret_cast<const char*>(p + count - 1), _MM_HINT_T0);
}
}  // namespace softdla::cpu
#endif
