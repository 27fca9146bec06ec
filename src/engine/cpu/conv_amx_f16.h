// FP16 convolutions as an implicit GEMM on AMX-BF16 tiles, for FP16 loadables on CPUs with AMX
// (Sapphire Rapids and later), at four times the AVX-512 FMA rate.
//
// BF16 keeps 8 significant bits and fp16 has 11, so every fp16 value is split exactly into two bf16
// parts: hi (its top 8 bits) and lo = x - hi (the other 3). An activation is stored as the bf16 pair
// (x_hi, x_hi) in one plane and (x_lo, x_lo) in another, a weight as the pair (w_hi, w_lo); tdpbf16ps
// then adds w_hi * x_hi + w_lo * x_hi and w_hi * x_lo + w_lo * x_lo, every product exact in fp32. So the
// convolution accumulates the exact products of the fp16 values in fp32, docs/NUMERICS.md's FP16
// contract; only the order of the additions differs from the FMA kernels (results within the FP16
// tolerance, not the same bits). Infinite weights would meet x_lo = 0 (0 * inf): such convolutions
// stay on the FMA kernels; an infinite or NaN activation is stored as (x, 0) and (0, 0).
//
// The reduction runs over (channel block of 16, tap), with no im2col. Inputs are laid out as in
// conv_implicit.h: the zero-padded input split by stride phase, planes Wq = OW + (S - 1) dw / sw wide,
// outputs on a grid as wide (each tap a shifted read of one phase), but 16 channels a plane: each pixel
// holds its 16 channels' pairs in one 64-byte row, so a tile of 16 consecutive pixels is 1 KB on cache
// line boundaries at every tap's shift, and the pixels are the tiles' rows (the weights the B tiles). A
// 1x1 convolution without padding has no taps to share a plane's rows: its input is packed in blocks of
// 32 pixels x 16 channels instead (each tile 1 KB contiguous, the channels the tiles' rows), per pixel
// block by the thread that uses it, or whole when small.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "aligned_vector.h"
#include "conv_implicit.h"
#include "conv_implicit_f32.h"
#include "half_output.h"
#include "thread_pool.h"

namespace softdla::cpu {

class AmxConvF16 {
 public:
  // Whether the path takes this convolution: dense (groups 1), 16 input channels or more, on the amx
  // path of a CPU with AMX-BF16, and (SOFTDLA_AMX_F16=auto, the default) faster there than on the FMA
  // kernels: a reduction of 256 products per output or more (channels x taps), 64 channels where
  // Winograd F(2x2, 3x3) is the alternative, or a plain 1x1 convolution (stride 1, no padding) into
  // kPlain1x1MinOutChannels or more. SOFTDLA_AMX_F16=all takes every convolution it can, 0 none.
  static bool applies(uint32_t groups, uint32_t channels, uint32_t out_channels, uint32_t taps, bool plain_1x1,
                      bool winograd_alternative);
  // Below this many output channels a short reduction's tile products are mostly overhead (MobileNetV2's
  // 96 -> 24 and 192 -> 32 projections: 1.1-1.6x the FMA kernel's time); from it the tiles win at any grid
  // (24 -> 144 at 56 x 56 0.90x, 64 -> 384 at 14 x 14 0.65x, 160 -> 960 at 7 x 7 0.62x; 16 -> 96 a tie).
  static constexpr uint32_t kPlain1x1MinOutChannels = 128;
  // weights: [K][C][R][S] fp32 holding finite fp16 values (an infinite weight would meet x_lo = 0 in
  // the lo planes: 0 * inf = NaN where x * inf is not).
  AmxConvF16(const ImplicitGeometry& g, const float* weights);

  // Receives the fp32 sums of output channel k of image n for `count` consecutive output pixels,
  // starting at spatial index hw0 (oh * OW + ow); `sums` may be modified.
  using Epilogue = std::function<void(uint32_t n, uint32_t k, size_t hw0, float* sums, size_t count)>;
  // `images` images, image n's [C][H][W] input (fp16 bits) at x + n * image_stride, in one pass: the
  // work units take every image's pixel blocks.
  // With `direct` (an FP16 chain of channel steps on AVX-512), each unit's sums go through the steps and
  // are stored as fp16 by the unit itself (half_output.h), as the FMA kernels' blocks do; the epilogue is
  // then not called.
  void run(const uint16_t* x, size_t images, size_t image_stride, ThreadPool& pool, const Epilogue& epilogue,
           const HalfOutput* direct = nullptr) const;

 private:
  void pack(const uint16_t* x, uint32_t* planes, size_t u0, size_t u1) const;
  void pack_columns(const uint16_t* x, size_t image_stride, uint32_t* blocks, size_t c0, size_t c1) const;
  void pack_pixel_block(const uint16_t* x, uint32_t* block, size_t pb) const;
  void unit(const uint32_t* input, uint32_t n, size_t row0, size_t pix0, const Epilogue& epilogue,
            const HalfOutput* direct) const;

  size_t lo_offset() const { return used_phases_.size() * phase_dwords_; }  // the lo planes, past the hi ones

  ImplicitGeometry g_;
  bool blocked_ = false;     // a 1x1 convolution reading its planes as they are: blocked input layout
  size_t wq_ = 0, hq_ = 0;   // a phase plane of the padded input
  std::vector<uint32_t> used_phases_;  // the stride phases (a * sw + b) some tap reads, in pack order
  size_t phase_dwords_ = 0;  // one phase's hi planes (every channel)
  size_t grid_ = 0;          // output grid pixels (OH * Wq)
  size_t plane_px_ = 0;      // pixels per plane, with slack for the last block's tile loads
  size_t c_blocks_ = 0;      // input channels in blocks of 16 (zero planes past C)
  size_t row_blocks_ = 0;    // output channels in blocks of 32 (zero weights past K)
  // Per block of 32 output channels, per (channel block, tap), per half of the block: an A tile of
  // (w_hi, w_lo) pairs, 16 rows x 64 bytes.
  AlignedVector<uint32_t> a_tiles_;  // on cache lines: each tile row one line
  std::vector<size_t> tap_offsets_;  // dwords from a grid pixel to its tap's input (phase and shift), per (r, s)
};

}  // namespace softdla::cpu
