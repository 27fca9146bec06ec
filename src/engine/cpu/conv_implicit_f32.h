// FP32 (and FP16-storage) convolution as an implicit GEMM on AVX-512: no im2col.
//
// Each image's input is widened once into zero-padded fp32 planes split by stride phase as
// conv_implicit.h does for INT8 (phase (a, b) holds padded rows a, a + sh, ... and columns b, b + sw,
// ...), Wq = OW + (S - 1) dw / sw columns wide, and outputs are computed on a grid as wide as a plane
// (the last columns of each grid row are computed and dropped): output pixel P = oh * Wq + ow reads, for
// tap (r, s), pixel P + (r dh / sh) Wq + s dw / sw of phase (r dh % sh, s dw % sw), so every tap is a
// shifted contiguous row of 32 grid pixels. The reduction runs over k = (c, r, s) ascending with one FMA
// per k from 0, exactly as the im2col GEMM (gemm.h) does, so every output has the same bits on either
// path.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "aligned_vector.h"
#include "half_output.h"
#include "thread_pool.h"

namespace softdla::cpu {

struct ImplicitGeometryF32 {
  uint32_t C, H, W, K, R, S, OH, OW, dh, dw, pt, pl;
  uint32_t sh = 1, sw = 1;
};

class ImplicitConvF32 {
 public:
  // Whether the path takes this convolution: dense (groups 1), on an AVX-512 CPU.
  static bool applies(uint32_t groups);
  // weights: [K][C][R][S] fp32.
  ImplicitConvF32(const ImplicitGeometryF32& g, const float* weights);

  // Receives the fp32 sums of output channel k of image n for `count` consecutive output pixels of one
  // output row, starting at spatial index hw0 (oh * OW + ow); `sums` may be modified.
  using Epilogue = std::function<void(uint32_t n, uint32_t k, size_t hw0, float* sums, size_t count)>;
  // `images` images, image n's [C][H][W] input at x + n * image_stride elements, fp16 bits (halves) or
  // fp32. With `direct` (fp16 only), the blocks store their results themselves and `epilogue` is not
  // called.
  void run(const void* x, size_t images, size_t image_stride, bool halves, ThreadPool& pool, const Epilogue& epilogue,
           const HalfOutput* direct = nullptr) const;

 private:
  void pack(const void* x, bool halves, float* planes, size_t u0, size_t u1) const;
  // One block from the widened planes, or (halves, a 1x1 convolution's fp16 input) from the input itself.
  // `block_planes`: planes holds only this pixel block's pixels, kBlockPixels floats a channel (the block
  // widened by run_widened_blocks).
  void block(const float* planes, const uint16_t* halves, uint32_t n, size_t row0, size_t pix0,
             const Epilogue& epilogue, const HalfOutput* direct, bool block_planes = false) const;
  // The fp16 input lines of the pixel block from pix0 (one or two in each of C planes of `image`: more
  // streams than the hardware prefetchers follow), fetched a block before the tiles read them.
  void prefetch_block_input(const uint16_t* image, size_t pix0) const;
  // A 1x1 convolution reading fp16 (reads_halves_): one unit per pixel block, its input widened once for
  // all its output channels.
  void run_widened_blocks(const uint16_t* x, size_t images, size_t image_stride, ThreadPool& pool,
                          const Epilogue& epilogue, const HalfOutput* direct) const;
  // A group of `count` packed images (image n's planes at planes + n * image_floats, image n0 + n of the
  // batch) on the gathered lane tiles (gathers_): units of an image, a block of 48 output channels and a
  // part of the image's output pixels.
  void run_gathered(const float* planes, size_t image_floats, size_t n0, size_t count, ThreadPool& pool,
                    const Epilogue& epilogue, const HalfOutput* direct) const;
  void gathered_unit(const float* planes, uint32_t n, size_t row0, size_t col0, size_t cols, const Epilogue& epilogue,
                     const HalfOutput* direct) const;

  // The lane tiles' weight panel of block `block` (48 output channels a block), and its size.
  const float* panel_of(size_t block) const;
  size_t panel_bytes() const;

  ImplicitGeometryF32 g_;
  size_t wq_ = 0, hq_ = 0;    // a phase plane
  std::vector<uint32_t> used_phases_;  // the stride phases (a * sw + b) some tap reads, in pack order
  size_t grid_ = 0;           // output grid pixels (OH * Wq)
  size_t plane_px_ = 0;       // floats per plane, with slack for the last block's loads
  size_t k_rows_ = 0;         // K rounded up to whole weight panels (zero weight rows past K)
  // Panels of 12 rows, k-major: [k_rows / 12][C * R * S][12], k = (c, r, s); with lanes_, of 48 rows.
  AlignedVector<float> weights_;
  std::vector<size_t> tap_offsets_;    // floats from a grid pixel to its tap's input, per (r, s)
  bool plain_planes_ = false;          // a plane is an input channel as it is (stride 1, no padding)
  bool reads_halves_ = false;          // fp16 inputs read by the tiles themselves (1x1, plain, few outputs)
  bool widens_blocks_ = false;         // reads_halves_, over several tiles a column: each pixel block widened once
  bool lanes_ = false;                 // a 1x1 convolution on output-channel lane tiles (conv_lanes_f32.h)
  // A k x k convolution over a grid the pixel vectors fit badly (7 x 7) on the same lane tiles, each output
  // pixel gathered from its grid position: no grid column past a row's end is computed.
  bool gathers_ = false;
  std::vector<size_t> pixel_off_;      // gathers_: each output pixel's grid position (oh * Wq + ow)
  std::vector<size_t> k_off_;          // gathers_: step (c, r, s)'s offset from a grid position, then slack
  size_t block_rows_ = 0;              // output channels a work unit
};

}  // namespace softdla::cpu
