// Fully connected layers in FP32/FP16 (a 1x1 convolution over a 1x1 input: a classifier's head, a
// squeeze-excitation block) as matrix-vector products. The GEMM paths would spend a 16-column panel (or
// a 64-pixel block) on each image's single pixel; here the weights are transposed to [C][K] once, so 16
// output channels share each vector FMA, and a few images share each weight load.
//
// Every output takes one FMA per input channel in ascending order, starting from zero: the order
// gemm_f32 and the implicit GEMM give it, so the results have the same bits as on those paths.
//
// An FP16 layer keeps its weights as fp16 and widens them as it loads them (exact): at batch 1 the layer
// is a single pass over its weights (a classifier's 1280 x 1000 is 5 MiB in fp32, past the caches), so
// half the bytes is close to half the time.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "aligned_vector.h"
#include "cpu_isa.h"
#include "thread_pool.h"

namespace softdla::cpu {

class GemvF32 {
 public:
  // Whether this CPU path runs it (AVX-512, or AVX2 with FMA); elsewhere the GEMM does.
  static bool applies(Isa isa);
  // weights: [K][C] fp32; halves: the values are fp16 (an FP16 layer), so they may be kept as fp16.
  GemvF32(const float* weights, size_t k, size_t c, bool halves);

  // y[n * K + k] = sum over c of weights[k][c] * x[n * C + c], for images n in [0, images); x holds fp16
  // bits (halves) or fp32.
  void run(const void* x, bool halves, size_t images, float* y, ThreadPool& pool) const;

 private:
  size_t k_ = 0, c_ = 0, kp_ = 0;  // kp_: K rounded up to whole blocks of output channels
  // [kp_ / 128][C][128]: each block of 128 output channels one stream, as a unit reads it (a [C][kp_]
  // layout read 256 bytes a row 2 KiB apart, which the prefetchers followed badly); zeros past K.
  AlignedVector<float> wt_;
  AlignedVector<uint16_t> wh_;      // the same as fp16 bits, in place of wt_ for an FP16 layer
};

}  // namespace softdla::cpu
