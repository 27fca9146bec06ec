// INT8 fully connected layers (a 1x1 convolution over a 1x1 input: a classifier's head) as exact
// matrix-vector products on AVX-512 VNNI. The GEMM paths spend a 16-column panel on each image's single
// pixel (sixteen times the work, and the weights read per panel); here 16 output channels share each
// vpdpbusd, four input channels a lane, and up to three images share each weight load.
//
// vpdpbusd multiplies unsigned by signed bytes, so the inputs are offset by 128 (x ^ 0x80) and the offset
// taken back per output channel, as gemm_vnni.h does: sum(w * (x + 128)) - 128 * sum(w), both exact in
// int32 while C <= kVnniMaxK. The sums are the exact integers every other path gives.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "aligned_vector.h"
#include "cpu_isa.h"
#include "thread_pool.h"

namespace softdla::cpu {

class GemvS8Vnni {
 public:
  // Whether this CPU path and depth suit it: AVX-512 VNNI (the avx512vnni and amx paths), C <= kVnniMaxK.
  static bool applies(Isa isa, size_t c);
  // weights: [K][C] int8.
  GemvS8Vnni(const int8_t* weights, size_t k, size_t c);

  // sums[n * K + k] = sum over c of weights[k][c] * x[n * C + c] (exact), images n in [0, images).
  void run(const int8_t* x, size_t images, int32_t* sums, ThreadPool& pool) const;

 private:
  size_t k_ = 0, c_ = 0, kp_ = 0, quads_ = 0;  // kp_: K in whole blocks; quads_: C in quads of 4
  AlignedVector<int8_t> w_;                       // [kp_ / 128][quad][128][4], zeros past K and C: a block's
                                                // weights one stream (gemv_f32.h)
  std::vector<int32_t> start_;                  // [kp_]: -128 * the channel's weight sum
};

}  // namespace softdla::cpu
