// The FP16 epilogue of the output-channel lane tiles (conv_lanes_f32.h) in registers: a tile of 8 pixels
// x 16 kV channels takes its channel steps with each lane's own channel operands (channel_lanes.h), the
// fused residual add (the other input's rows transposed into lanes), the rounding to fp16, and stores
// itself through a 16-bit transpose into the channels' output rows.
//
// Why: the lane tiles otherwise store fp32 sums into the block's rows and a second pass takes each
// channel's row through its steps (half_output.h); on MobileNetV2's 14x14 and 7x7 expansions (64 to 160
// input channels) that pass was a sixth of the layer. Each element goes through the same float
// operations in the same order as on the row path (half_steps_avx512.h), so the bits are the same.
#pragma once
#include <cstddef>
#include <cstdint>

#include "channel_lanes.h"
#include "conv_lanes_f32.h"
#include "half_convert_avx512.h"
#include "half_transpose_avx512.h"
#include "half_output.h"
#include "x86_simd.h"

namespace softdla::cpu::lanes_f32 {

// Where a tile's results go: channels [k0, k0 + channels) of image `image` at output indices hw0 on
// (k0 a multiple of 16; the tile's 8 pixels are consecutive outputs: a 1x1 convolution of stride 1
// without padding, or gathered pixels).
struct HalfSink {
  const HalfOutput* o;
  uint32_t image;
  size_t k0, channels, hw0;
};

#ifdef SOFTDLA_X86
// An 8-pixel tile of kV vectors of output channels, stored as fp16 through the sink's epilogue.
template <size_t kV, class Input>
__attribute__((target("avx512f,avx512bw,avx512vl,fma,f16c"), always_inline)) inline void tile_to_halves_from(
    const float* panel, const Input& in, size_t steps, const HalfSink& sink) {
  __m512 c[kTilePixels][kV];
  accumulate(panel, in, steps, c);
  const HalfOutput& o = *sink.o;
#pragma GCC unroll 3
  for (size_t v = 0; v < kV; ++v) {
    const size_t live = std::min<size_t>(16, sink.channels - 16 * v), k = sink.k0 + 16 * v;
    __m512 y[kTilePixels];
#pragma GCC unroll 8
    for (size_t p = 0; p < kTilePixels; ++p) y[p] = c[p][v];
    apply_channel_lanes(o.lanes->kinds.data(), o.lanes->block(k / 16), o.lanes->n_steps, y);
    const size_t at = sink.image * o.image_stride + k * o.ld + sink.hw0;
    if (o.other) {
      __m512 theirs[kTilePixels];
      load_half_rows(o.other + at, o.ld, live, theirs);
#pragma GCC unroll 8
      for (size_t p = 0; p < kTilePixels; ++p) y[p] = _mm512_add_ps(_mm512_cvtph_ps(to_halves_avx512(y[p])), theirs[p]);
      apply_channel_lanes(o.lanes_after->kinds.data(), o.lanes_after->block(k / 16), o.lanes_after->n_steps, y);
    }
    __m256i h[kTilePixels];
#pragma GCC unroll 8
    for (size_t p = 0; p < kTilePixels; ++p) h[p] = to_halves_avx512(y[p]);
    store_half_rows(h, o.out + at, o.ld, live);
  }
}

// A 1x1 convolution's tile (PlaneInput), and a k x k one's of gathered pixels (GatherInput).
template <size_t kV>
__attribute__((target("avx512f,avx512bw,avx512vl,fma,f16c"), noinline)) void tile_to_halves(
    const float* panel, const float* x, size_t plane_px, size_t channels, const HalfSink& sink) {
  tile_to_halves_from<kV>(panel, PlaneInput{x, plane_px}, channels, sink);
}
template <size_t kV>
__attribute__((target("avx512f,avx512bw,avx512vl,fma,f16c"), noinline)) void gather_to_halves(
    const float* panel, const float* planes, const size_t* pixel_off, const size_t* k_off, size_t steps,
    const HalfSink& sink) {
  tile_to_halves_from<kV>(panel, gather_input<kTilePixels>(planes, pixel_off, k_off), steps, sink);
}

using HalfTileFn = void (*)(const float*, const float*, size_t, size_t, const HalfSink&);
using HalfGatherFn = void (*)(const float*, const float*, const size_t*, const size_t*, size_t, const HalfSink&);

// The 8-pixel tile for a block of `channels` output channels (1 to 48).
inline HalfTileFn tile_to_halves_for(size_t channels) {
  return channels <= 16 ? tile_to_halves<1> : channels <= 32 ? tile_to_halves<2> : tile_to_halves<3>;
}
inline HalfGatherFn gather_to_halves_for(size_t channels) {
  return channels <= 16 ? gather_to_halves<1> : channels <= 32 ? gather_to_halves<2> : gather_to_halves<3>;
}
#endif

}  // namespace softdla::cpu::lanes_f32
