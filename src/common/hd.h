// SOFTDLA_HD marks small functions that the CPU backend and the CUDA kernels share (numerics, layouts):
// __host__ __device__ under nvcc, nothing for the host compiler.
#pragma once
#if defined(__CUDACC__)
#define SOFTDLA_HD __host__ __device__
#else
#define SOFTDLA_HD
#endif
