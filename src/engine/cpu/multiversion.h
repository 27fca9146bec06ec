// Hot loops compiled twice, for AVX2 and for baseline x86-64, picked by CPU feature at load time
// (GCC function multiversioning). Off under sanitizers, whose runtimes do not support the ifunc dispatch.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__)
#define SOFTDLA_MULTIVERSION __attribute__((target_clones("avx2", "default")))
#else
#define SOFTDLA_MULTIVERSION
#endif
