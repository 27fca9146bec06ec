// INT8 convolution with a k x k kernel as an implicit GEMM on AMX-INT8 tiles, AVX-512 VNNI or AVX2 (int16
// pairs, vpmaddwd): no im2col. The AMX tiles read the same packed input as vpdpbusd: 16 quad rows of 16
// pixels are one tile load with the quad row stride.
//
// Each image's input is packed once into offset byte quads over the zero-padded plane, split by stride
// phase: phase (a, b) holds padded rows a, a + sh, ... and columns b, b + sw, ..., as [channel quad]
// [pixel][4 channels], pixel-contiguous. Outputs are computed on a grid as wide as a phase plane
// (Wq = OW + (S - 1) dw / sw), where output pixel P = oh * Wq + ow reads, for tap (r, s), pixel
// P + (r dh / sh) Wq + s dw / sw of phase (r dh % sh, s dw % sw): every tap is the same 1x1 product with
// its B shifted by a constant, so a register tile of 32 grid pixels loads 64 contiguous bytes per channel
// quad and tap. The grid's last columns of each row are computed and dropped (3 % of a 56-wide 3x3
// layer, 23 % of a 7-wide one). On AVX-512 VNNI the int8 results come from lane tiles instead
// (run_lanes): up to 48 output channels on the vector lanes and each output pixel's quads broadcast from
// its own packed position, so only outputs are computed. Exact as gemm_vnni.h: the +128 offset is taken back with
// the weight sums, and int32 cannot overflow while K <= kVnniMaxK.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "aligned_vector.h"
#include "int8_requant.h"
#include "thread_pool.h"

namespace softdla::cpu {

struct ImplicitGeometry {
  uint32_t C, H, W, K, R, S, OH, OW, sh, sw, dh, dw, pt, pl;
};

// The stride phases an implicit GEMM's taps read, in the order taps first reach them (phase a * sw + b
// holds padded rows a, a + sh, ... and columns b, b + sw, ...), and per tap (r, s) its phase's slot in
// that list and its grid offset (r dh / sh) wq + s dw / sw, for a grid wq pixels wide.
struct StridePhases {
  std::vector<uint32_t> phases;
  std::vector<size_t> slot, offset;  // per tap, (r, s) order
};
StridePhases stride_phases(const ImplicitGeometry& g, size_t wq);

// The columns [first, past) of a phase plane wq wide whose input column lies inside the input: phase
// column b of column phase pb reads input column pb + b sw - pl, of W.
struct PhaseColumns {
  size_t first = 0, past = 0;
};
PhaseColumns phase_columns(uint32_t W, uint32_t pl, uint32_t sw, size_t wq, size_t pb);

class ImplicitConvS8 {
 public:
  // Whether the path takes this convolution (groups 1; 1x1 of stride 1 reads its planes directly instead).
  static bool applies(uint32_t groups, uint32_t sh, uint32_t sw, uint32_t R, uint32_t S);
  // weights: [K][C][R][S] int8. pairs: the AVX2 form (int16 pairs and vpmaddwd) instead of AVX-512 VNNI's
  // offset byte quads and vpdpbusd; both exact.
  ImplicitConvS8(const ImplicitGeometry& g, const int8_t* weights, bool pairs);

  // Receives int32 sums of output channel k of image n for `count` consecutive output pixels (of one
  // output row or of rows that follow one another), starting at spatial index hw0 (oh * OW + ow).
  using Epilogue = std::function<void(uint32_t n, uint32_t k, size_t hw0, const int32_t* sums, size_t count)>;
  // `images` images, image n's [C][H][W] int8 input at x + n * image_stride. All of them go through one
  // pass over the weights: the work units take every image's pixel blocks for a row block of weights.
  // With `direct` (rows: output channels, columns: output pixels), blocks on the AVX-512 VNNI path write
  // int8 results themselves (the epilogue is left for the other paths).
  void run(const int8_t* x, size_t images, size_t image_stride, ThreadPool& pool, const Epilogue& epilogue,
           const Int8Output* direct = nullptr) const;
  // Whether run() takes `direct` on this path.
  bool writes_int8() const { return !pairs_ && !amx_; }

 private:
  void pack(const int8_t* x, uint8_t* packed, size_t q0, size_t q1) const;
  size_t interleave_run(const int8_t* const* src, uint8_t* d, size_t n) const;
  void block(const uint8_t* packed, uint32_t n, size_t row0, size_t pix0, const Epilogue& epilogue,
             const Int8Output* direct) const;
  void block_amx(const uint8_t* packed, uint32_t n, size_t row0, size_t pix0, const Epilogue& epilogue) const;
  void pack_amx_weights(const int8_t* weights);

  static constexpr size_t kAmxQuads = 16;  // quads per AMX tile row (64 channels)

  ImplicitGeometry g_;
  bool pairs_ = false;
  bool amx_ = false;        // AMX-INT8 tiles (the amx path, 32 channels or more)
  uint32_t per_slot_ = 4;   // channels per 4-byte slot: 4 (quads) or 2 (int16 pairs)
  size_t cq_ = 0;           // channel slots
  size_t wq_ = 0, hq_ = 0;  // a phase plane
  std::vector<uint32_t> used_phases_;  // the stride phases (a * sw + b) some tap reads, in pack order
  size_t grid_ = 0;         // output grid pixels (OH * Wq)
  size_t plane_px_ = 0;     // pixels per quad row of a phase plane, with slack for the last loads
  AlignedVector<int32_t> taps_quads_;    // [K + 8][taps][cq] weight quads (8 zero rows past K; not with AMX)
  AlignedVector<int32_t> amx_a_;         // AMX: the weights' A tiles (pack_amx_weights)
  std::vector<int32_t> offset_sums_;   // 128 * sum of each output channel's weights
  std::vector<int8_t> zero_row_;       // an input row of zeros: what lanes past C read while packing
  std::vector<int32_t> offset_inits_;  // -offset_sums_, then a block of zeros: the tiles' starting sums
  std::vector<size_t> tap_offsets_;    // bytes from a grid pixel's packed position to its tap's input
  // The AVX-512 VNNI path's lane tiles (gemm_lanes_s8_gather): output channels on the lanes, each output
  // pixel's quads gathered from the packed planes, so no grid column is computed and dropped (a 7 x 7
  // 3 x 3 layer's grid is 64 pixels for 49 outputs, a 14 x 14 one's 224 for 196). One unit: output
  // channels of lane block `block` of image `image` (packed at `packed`), output pixels [col0, col0 + cols).
  void run_lanes(const uint8_t* packed, size_t image, const Int8Output& direct, size_t block, size_t col0,
                 size_t cols) const;
  bool lanes_ = false;
  std::vector<size_t> lane_blocks_;  // lanes_s8::even_blocks(K): each lane block's first output channel, K last
  AlignedVector<int32_t> lanes_w_;   // [lane block][taps * cq][48] weight quads, output channels on the lanes
  std::vector<size_t> k_off_;      // per (tap, quad) of a row of taps_quads_: bytes from a pixel's packed position
  std::vector<size_t> pixel_off_;  // per output pixel (oh * OW + ow): its packed position, bytes
};

}  // namespace softdla::cpu
