// A chain of per-channel SDP steps (SdpChain::channel_steps) laid out step by step, each operand a row
// over the channels: the epilogue of register tiles whose rows are consecutive output channels (the FP16
// pixel-vector tiles of conv_implicit_f32.cpp). Row r of a tile starting at channel k0 broadcasts its
// operand from operand(j) + k0 + r, a fixed displacement from one pointer, and each step's kind is
// dispatched once for the whole tile: the per-channel form (HalfOutput::steps, a dispatch and three
// address computations per row and step) spent more time in scalar bookkeeping than in arithmetic on
// MobileNetV2's short reductions.
#pragma once
#include <cstddef>
#include <vector>

#include "sdp_chain.h"

namespace softdla::cpu {

struct ChannelStepRows {
  size_t n_steps = 0, channels = 0;
  std::vector<SdpKind> kinds;   // [step]: the same for every channel
  std::vector<float> operands;  // [step][operand, lo, hi][channel]
  // The last step clips every channel into [-65504, 65504] (ReLU6): the fp16 store's saturation to
  // +-65504 is then a no-op (a NaN stays a NaN either way) and is skipped.
  bool bounded = false;

  ChannelStepRows() = default;
  // steps: [channels][n_steps], as SdpChain::channel_steps gives them.
  ChannelStepRows(const std::vector<ChannelStep>& steps, uint32_t n_channels) : channels(n_channels) {
    n_steps = channels ? steps.size() / channels : 0;
    for (size_t j = 0; j < n_steps; ++j) kinds.push_back(steps[j].kind);
    operands.resize(n_steps * 3 * channels);
    bounded = n_steps > 0 && kinds.back() == SdpKind::kClip;
    for (size_t k = 0; k < channels; ++k)
      for (size_t j = 0; j < n_steps; ++j) {
        const ChannelStep& s = steps[k * n_steps + j];
        operands[(j * 3 + 0) * channels + k] = s.operand;
        operands[(j * 3 + 1) * channels + k] = s.lo;
        operands[(j * 3 + 2) * channels + k] = s.hi;
        // Written so that a NaN bound fails it: min/max with a NaN bound pass values through unclipped.
        if (j + 1 == n_steps && !(s.lo >= -65504.f && s.hi <= 65504.f)) bounded = false;
      }
  }
  const float* operand(size_t j) const { return operands.data() + j * 3 * channels; }
  const float* lo(size_t j) const { return operand(j) + channels; }
  const float* hi(size_t j) const { return operand(j) + 2 * channels; }
};

}  // namespace softdla::cpu
