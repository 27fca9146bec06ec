// FP16 3x3 convolutions of stride 1 as Winograd F(2x2, 3x3), the algorithm NVDLA's convolution core
// runs for FP16 (docs/NUMERICS.md §2): 16 multiplies per 2x2 outputs and channel instead of 36.
//
// With d a 4x4 input patch, g a 3x3 kernel and
//   B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1],  G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1],
//   A^T = [1 1 1 0; 0 1 -1 -1],
// the 2x2 outputs are Y = A^T [ sum over c of (G g G^T) . (B^T d B) ] A. The weight transform G g G^T
// is computed once in double and rounded to fp32; the input and output transforms are fp32 additions
// in a fixed order, and the 16 products per tile accumulate over the input channels on the FP32 GEMM
// (one FMA per channel, ascending from zero). Every step is the same per element on every CPU path, so
// the results have the same bits on portable, AVX2 and AVX-512 (they differ from the direct
// convolution's within the FP16 tolerance).
//
// Layout. Tiles of 2x2 outputs are computed on a grid TWq = TW + 1 tiles wide (TW = ceil(OW / 2); the
// last column of each grid row is computed and dropped), so that grid tile g = ty * TWq + tx reads its
// patch row i at element 2 g + (i / 2) * Wp of phase plane i % 2: the zero-padded input split into its
// even and odd rows, Wp = 2 TWq wide. Sixteen consecutive grid tiles are one vector of every step.
// Work units are 32 grid tiles of one image: their transformed input (16 positions x C channels x 32
// tiles, as two packed 16-column GEMM panels per position) feeds 16 GEMMs per block of output channels,
// whose sums are transformed back and stored.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "aligned_vector.h"
#include "cpu_isa.h"
#include "half_output.h"
#include "thread_pool.h"

namespace softdla::cpu {

struct WinogradGeometry {
  uint32_t C, H, W, K, OH, OW, pt, pl;
};

class WinogradConvF16 {
 public:
  // Whether a convolution takes this path: 3x3, stride 1, dilation 1, dense, and a grid of at least two
  // work units per image (smaller layers leave most of a unit's 32 tiles empty). SOFTDLA_WINOGRAD=0
  // turns the path off (read once).
  static bool applies(uint32_t r, uint32_t s, uint32_t sh, uint32_t sw, uint32_t dh, uint32_t dw, uint32_t groups,
                      uint32_t oh, uint32_t ow);
  // Whether the path is faster than the direct FMA kernel for C -> K channels over `images` images on
  // `isa`, where applies() holds. Each work unit reads all 16 K C transformed weights (1.8 times the
  // direct kernel's bytes); in a whole network they come from memory, not cache. On AVX-512 at batch 1,
  // weights beyond kColdWeightBytes cost Winograd more than its fewer products save. Measured inside
  // ResNet-50: its 14 x 14 layers (256 channels, 4 MB) took 1.70-1.89 ms on Winograd against 1.56-1.59 on
  // the direct kernel before the GEMMs streamed their next weight rows into L2 (panel_stream.h); with
  // the stream Winograd is the faster again (ResNet-18 and -50 FP16 at batch 1 0.97-0.99x the time with
  // them on Winograd), so the bound is 4 MB; larger layers (VGG's 512-channel ones) keep the direct
  // kernel, not measured since. Larger batches read the weights once for several images (batch 8: 1.15
  // against 1.44 ms an image), and the AVX2 direct kernel is slower (Winograd 2.55-2.63 against
  // 2.75-2.79 ms at batch 1).
  static bool pays(uint32_t C, uint32_t K, size_t images, Isa isa);
  static constexpr size_t kColdWeightBytes = size_t(4) << 20;
  // weights: [K][C][3][3] fp32 holding finite fp16 values.
  WinogradConvF16(const WinogradGeometry& g, const float* weights);

  using Epilogue = std::function<void(uint32_t n, uint32_t k, size_t hw0, float* sums, size_t count)>;
  // `images` images, image n's [C][H][W] fp16 input at x + n * image_stride. With `direct`, the results
  // are stored through it; otherwise each output run of sums is handed to `epilogue`. False, having
  // written nothing, when an input holds an infinity or NaN: the transforms would spread it over the
  // tile (inf - inf), so the caller runs the direct convolution instead.
  bool run(const uint16_t* x, size_t images, size_t image_stride, ThreadPool& pool, const Epilogue& epilogue,
           const HalfOutput* direct) const;

 private:
  void pack(const uint16_t* x, float* planes, size_t c0, size_t c1) const;
  void unit(const float* planes, uint32_t n, size_t block, size_t k0, size_t k1, const Epilogue& epilogue,
            const HalfOutput* direct) const;

  WinogradGeometry g_;
  size_t th_ = 0, tw_ = 0, twq_ = 0, wp_ = 0;  // tile rows, tiles a row, grid tiles a row, plane width
  size_t phase_len_ = 0;                       // floats per phase plane (with slack for the last unit)
  size_t blocks_ = 0;                          // work units per image
  AlignedVector<float> u_;                       // transformed weights [16][K][C]
};

}  // namespace softdla::cpu
