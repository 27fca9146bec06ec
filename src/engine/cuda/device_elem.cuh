// Loading and storing one element of a float tensor on the device, with the CPU backend's exact
// conversions (fp16 saturates to +-65504 instead of overflowing to infinity; docs/NUMERICS.md).
#pragma once
#include <cstdint>

#include "kernel.h"  // with_storage, with_float_storage
#include "model.h"
#include "numerics.h"

namespace softdla::gpu {

__device__ inline float load_f(const float* p, uint64_t i) { return p[i]; }
__device__ inline float load_f(const uint16_t* p, uint64_t i) { return num::half_to_float(p[i]); }
__device__ inline void store_f(float* p, uint64_t i, float v) { p[i] = v; }
__device__ inline void store_f(uint16_t* p, uint64_t i, float v) { p[i] = num::float_to_half(v); }

// A tensor element as a convolution operand: int8 stays an integer, fp16 widens to float.
__device__ inline int32_t acc_operand(const int8_t* p, uint64_t i) { return p[i]; }
__device__ inline float acc_operand(const uint16_t* p, uint64_t i) { return load_f(p, i); }
__device__ inline float acc_operand(const float* p, uint64_t i) { return p[i]; }

// Calls fn with a null pointer of an unsigned type of `elem` bytes (1, 2 or 4): for code that only
// moves elements.
template <class Fn>
void by_element_size(size_t elem, Fn&& fn) {
  if (elem == 1) fn(static_cast<uint8_t*>(nullptr));
  else if (elem == 2) fn(static_cast<uint16_t*>(nullptr));
  else fn(static_cast<uint32_t*>(nullptr));
}

// Unpacks a flat NCHW index.
struct Nchw {
  uint32_t n, c, h, w;
};
// Element i of an NCHW shape. Index = uint32_t when the tensor has fewer than 2^32 elements: the
// 64-bit division is emulated and dominates copy kernels.
template <class Index = uint64_t>
__host__ __device__ inline Nchw unflatten(uint64_t i64, const Shape& s) {
  Index i = Index(i64);
  Nchw r;
  r.w = uint32_t(i % s[3]);
  i /= s[3];
  r.h = uint32_t(i % s[2]);
  i /= s[2];
  r.c = uint32_t(i % s[1]);
  r.n = uint32_t(i / s[1]);
  return r;
}

}  // namespace softdla::gpu
