// Fully connected layers in FP32/FP16 (a 1x1 convolution over a 1x1 input: a classifier's head, a
// squeeze-excitation block) as matrix-vector products. The GEMM paths would spend a 16-column panel (or
// a 64-pixel block) on each image's single pixel; here the weights are transposed to [C][K] once, so 16
// output channels share each vector FMA, and a few images share each weight load.
//
// Every output takes one FMA per input channel in ascending order, starting from zero: the order
// gemm_f32 and the implicit GEMM give it, so the results have the same bits as on those paths.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cpu_isa.h"
#include "thread_pool.h"

namespace softdla::cpu {

class GemvF32 {
 public:
  // Whether this CPU path runs it (AVX-512, or AVX2 with FMA); elsewhere the GEMM does.
  static bool applies(Isa isa);
  // weights: [K][C] fp32.
  GemvF32(const float* weights, size_t k, size_t c);

  // y[n * K + k] = sum over c of weights[k][c] * x[n * C + c], for images n in [0, images); x holds fp16
  // bits (halves) or fp32.
  void run(const void* x, bool halves, size_t images, float* y, ThreadPool& pool) const;

 private:
  size_t k_ = 0, c_ = 0, kp_ = 0;  // kp_: K rounded up to whole blocks of output channels
  std::vector<float> wt_;         // [C][kp_], zeros past K
};

}  // namespace softdla::cpu
