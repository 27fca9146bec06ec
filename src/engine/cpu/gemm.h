// Dense row-major GEMM cores used by convolution and deconvolution: C[M x N] = A[M x K] * B[K x N].
#pragma once
#include <cstddef>
#include <cstdint>

namespace softdla::cpu {

// fp32: C is overwritten.
void gemm_f32(const float* a, const float* b, float* c, size_t m, size_t n, size_t k);

// int8 x int8: exact products accumulated in int64 (C is overwritten). Internally int32 partial sums
// over K-chunks that cannot overflow, then widened, so results are exact for any K.
void gemm_s8(const int8_t* a, const int8_t* b, int64_t* c, size_t m, size_t n, size_t k);

}  // namespace softdla::cpu
