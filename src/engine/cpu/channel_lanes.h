// A chain of per-channel SDP steps (SdpChain::channel_steps) laid out for vectors that hold sixteen
// channels of one pixel, each lane with its own channel's operands: the epilogue of the kernels that
// compute across channels (depthwise_f16_blocks.h, fully connected layers), where SdpChain's epilogues
// take a run of one channel with its operand broadcast.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "sdp_chain.h"
#include "sdp_lanes_avx2.h"
#include "sdp_lanes_avx512.h"
#include "x86_simd.h"

namespace softdla::cpu {

struct ChannelLanes {
  static constexpr size_t kLanes = 16;
  size_t n_steps = 0;
  std::vector<SdpKind> kinds;   // [step]: the same for every channel
  std::vector<float> operands;  // [block of 16 channels][step][operand, lo, hi][16], zeros past the channels

  ChannelLanes() = default;
  // steps: [channels][n_steps].
  ChannelLanes(const std::vector<ChannelStep>& steps, uint32_t channels) {
    n_steps = channels ? steps.size() / channels : 0;
    for (size_t j = 0; j < n_steps; ++j) kinds.push_back(steps[j].kind);
    const size_t blocks = (size_t(channels) + kLanes - 1) / kLanes;
    operands.assign(blocks * n_steps * 3 * kLanes, 0.f);
    for (uint32_t k = 0; k < channels; ++k)
      for (size_t j = 0; j < n_steps; ++j) {
        const ChannelStep& s = steps[k * n_steps + j];
        float* o = operands.data() + ((k / kLanes) * n_steps + j) * 3 * kLanes + k % kLanes;
        o[0] = s.operand, o[kLanes] = s.lo, o[2 * kLanes] = s.hi;
      }
  }
  // The operands of channels [16 b, 16 b + 16).
  const float* block(size_t b) const { return operands.data() + b * n_steps * 3 * kLanes; }
};

#ifdef SOFTDLA_X86
// x[0 .. V), each sixteen channels of one block (ops = ChannelLanes::block), through the steps: each step's
// kind dispatched and its operands loaded once for all V.
template <size_t V>
__attribute__((target("avx512f"), always_inline)) inline void apply_channel_lanes(const SdpKind* kinds, const float* ops,
                                                                                size_t n_steps, __m512 (&x)[V]) {
  constexpr size_t L = ChannelLanes::kLanes;
  for (size_t j = 0; j < n_steps; ++j) {
    const float* o = ops + j * 3 * L;
    const __m512 k = _mm512_loadu_ps(o), lo = _mm512_loadu_ps(o + L), hi = _mm512_loadu_ps(o + 2 * L);
    step_lanes(kinds[j], k, lo, hi, x);
  }
}

// The same on eight AVX2 lanes: channels [8 h, 8 h + 8) of a block, ops = ChannelLanes::block + 8 h.
template <size_t V>
__attribute__((target("avx2"), always_inline)) inline void apply_channel_lanes(const SdpKind* kinds, const float* ops,
                                                                             size_t n_steps, __m256 (&x)[V]) {
  constexpr size_t L = ChannelLanes::kLanes;
  for (size_t j = 0; j < n_steps; ++j) {
    const float* o = ops + j * 3 * L;
    const __m256 k = _mm256_loadu_ps(o), lo = _mm256_loadu_ps(o + L), hi = _mm256_loadu_ps(o + 2 * L);
    step_lanes(kinds[j], k, lo, hi, x);
  }
}
#endif

}  // namespace softdla::cpu
