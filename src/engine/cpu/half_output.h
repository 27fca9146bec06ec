// Where an FP16 convolution's results go when its kernel stores them itself (AVX-512, a chain of
// channel steps; SdpChain::channel_steps), and the store of a block of sums through it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "half_steps_avx512.h"
#include "implicit_grid.h"
#include "sdp_chain.h"

namespace softdla::cpu {

// Channel k's sums go through steps[k * n_steps, (k + 1) * n_steps) and are stored as fp16 at
// out[n * image_stride + k * ld + output index]; with `other`, the fused residual add as
// SdpChain::run_residual_halves runs it (other at the same index, then after[k * n_after, ...)).
struct ChannelLanes;
struct ChannelStepRows;
struct HalfOutput {
  const ChannelStep* steps = nullptr;
  size_t n_steps = 0;
  uint16_t* out = nullptr;
  size_t ld = 0, image_stride = 0;
  const uint16_t* other = nullptr;
  const ChannelStep* after = nullptr;
  size_t n_after = 0;
  // The same steps laid out sixteen channels a vector (channel_lanes.h), for kernels whose vectors hold
  // channels (the FP16 lane tiles); null where the caller has not made them.
  const ChannelLanes* lanes = nullptr;
  const ChannelLanes* lanes_after = nullptr;
  // The same steps laid out step by step (channel_step_rows.h), for register tiles of consecutive
  // channels; null where the caller has not made them.
  const ChannelStepRows* rows = nullptr;
  const ChannelStepRows* rows_after = nullptr;
};

// Rows [0, rows) of a block of sums (row r = channel row0 + r, kWidth floats a row, of which the first
// `width` are computed) through each channel's steps and stored as fp16 at the output runs: a block that
// is one run from its start (a 1x1 convolution) straight into the output, otherwise the whole row into
// a staging row and copied out run by run (with a residual, the add's other input first gathered into
// the same positions; positions no run covers are computed on and never stored).
template <size_t kRows, size_t kWidth>
void emit_runs_f16(const float* sums, size_t rows, size_t row0, size_t width, const GridRun* runs, size_t n_runs,
                   const HalfOutput& o, uint32_t image) {
  const size_t base = image * o.image_stride + row0 * o.ld;
  HalfRows h{sums, kWidth, rows, width, nullptr, 0, o.steps + row0 * o.n_steps, o.n_steps};
  h.after = o.after + row0 * o.n_after, h.n_after = o.n_after;
#ifdef SOFTDLA_X86
  // The chain laid out step by step where the caller made it (half_steps_avx512.h).
  const bool step_rows = kWidth % 16 == 0 && o.rows && (!o.other || o.rows_after);
  auto rows_out = [&](uint16_t* out, const uint16_t* other, size_t ld) {
    block_rows_to_halves<kWidth / 16>(sums, kWidth, rows, width, row0, out, other, ld, *o.rows, o.rows_after);
  };
#else
  const bool step_rows = false;
  auto rows_out = [](uint16_t*, const uint16_t*, size_t) {};
#endif
  if (n_runs == 1 && runs[0].p == 0 && runs[0].count == width) {
    h.out = o.out + base + runs[0].hw0, h.out_stride = o.ld;
    if (o.other) h.other = o.other + base + runs[0].hw0, h.other_stride = o.ld;
    if (step_rows) return rows_out(h.out, h.other, o.ld);
    return channel_steps_to_halves(h);
  }
  uint16_t theirs[kRows][kWidth], mine[kRows][kWidth];
  if (o.other) {
    std::memset(theirs, 0, sizeof(theirs));
    for (size_t r = 0; r < rows; ++r)
      for (size_t i = 0; i < n_runs; ++i)
        std::memcpy(&theirs[r][runs[i].p], o.other + base + r * o.ld + runs[i].hw0, runs[i].count * sizeof(uint16_t));
    h.other = &theirs[0][0], h.other_stride = kWidth;
  }
  h.out = &mine[0][0], h.out_stride = kWidth;
  if (step_rows) rows_out(h.out, h.other, kWidth);
  else channel_steps_to_halves(h);
  for (size_t r = 0; r < rows; ++r)
    for (size_t i = 0; i < n_runs; ++i)
      std::memcpy(o.out + base + r * o.ld + runs[i].hw0, &mine[r][runs[i].p], runs[i].count * sizeof(uint16_t));
}

}  // namespace softdla::cpu
