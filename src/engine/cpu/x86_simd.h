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
