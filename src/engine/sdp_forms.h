// Recognizes the SDP chains that both backends' convolution epilogues compute in a shortcut form
// (requant_window.h): a convolution's [Bias] [ReLU | Clip] requantization, and the residual add
// [Scale] EltAdd [ReLU | Clip] requantization. Every other chain takes the general per-element path.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "kernel.h"
#include "model.h"
#include "requant_window.h"

namespace softdla {

// An optional ReLU or Clip at step i as the clamp [lo, hi] (the full int32 range without one); i moves past it.
inline void optional_clamp(const SdpParams& p, size_t& i, int32_t& lo, int32_t& hi) {
  lo = INT32_MIN, hi = INT32_MAX;
  if (i < p.steps.size() && p.steps[i].kind == SdpKind::kRelu) lo = 0, ++i;
  else if (i < p.steps.size() && p.steps[i].kind == SdpKind::kClip) lo = p.steps[i].lo_i, hi = p.steps[i].hi_i, ++i;
}

// The chain as (bias?, clamp?, requant) when it has that form, which covers convolution + BatchNorm +
// ReLU/ReLU6/Clip.
inline bool fast_form(const SdpParams& p, int32_t& lo, int32_t& hi, const SdpStep*& bias) {
  if (p.lut != ActivationLut::kNone) return false;
  size_t i = 0;
  bias = nullptr;
  if (i < p.steps.size() && p.steps[i].kind == SdpKind::kBias) bias = &p.steps[i++];
  optional_clamp(p, i, lo, hi);
  return i == p.steps.size() && lo <= hi;
}

// One value per output channel (a single value broadcast), padded with zeros to whole 16-channel runs.
template <class T>
std::vector<T> per_channel(const std::vector<T>& v, uint32_t K, T absent) {
  std::vector<T> out((K + 15) / 16 * 16, T(0));
  for (uint32_t k = 0; k < K; ++k) out[k] = v.empty() ? absent : v[v.size() == 1 ? 0 : k];
  return out;
}

// Every output channel's RequantWindow for a chain in the fast form, or nothing when the chain is not
// in it or a channel's window does not exist.
inline std::optional<std::vector<num::RequantWindow>> conv_windows(const SdpParams& p, uint32_t K) {
  int32_t lo, hi;
  const SdpStep* bias = nullptr;
  if (!fast_form(p, lo, hi, bias)) return std::nullopt;
  const auto biases = per_channel<int32_t>(bias ? bias->ivalues : std::vector<int32_t>{}, K, 0);
  const auto mults = per_channel<int32_t>(p.requant.multiplier, K, 1);
  const auto shifts = per_channel<uint8_t>(p.requant.shift, K, 0);
  std::vector<num::RequantWindow> windows(K);
  for (uint32_t k = 0; k < K; ++k) {
    const auto w = num::make_requant_window(biases[k], lo, hi, mults[k], shifts[k]);
    if (!w) return std::nullopt;
    windows[k] = *w;
  }
  return windows;
}

// The residual add [Scale] EltAdd [ReLU | Clip] with one multiplier everywhere, as a ResidualWindow
// (requant_window.h), when its arithmetic fits that form.
inline std::optional<num::ResidualWindow> residual_window(const Op& op, const SdpParams& p) {
  if (p.lut != ActivationLut::kNone || p.requant.multiplier.size() != 1 || p.requant.shift.size() != 1) return {};
  size_t i = 0;
  bool has_scale = false;
  int32_t sm = 1, lo, hi;
  unsigned ss = 0;
  if (i < p.steps.size() && p.steps[i].kind == SdpKind::kScale) {
    if (p.steps[i].ivalues.size() != 1) return {};
    has_scale = true, sm = p.steps[i].ivalues[0], ss = p.steps[i].shift, ++i;
  }
  if (i >= p.steps.size() || p.steps[i].kind != SdpKind::kEltAdd || eltwise_operand_slot(op, p.steps[i].tensor) != 1)
    return {};
  const SdpStep& add = p.steps[i++];
  optional_clamp(p, i, lo, hi);
  if (i != p.steps.size()) return {};
  return num::make_residual_window(has_scale, sm, ss, add.tensor_multiplier, add.tensor_shift, lo, hi,
                                   p.requant.multiplier[0], p.requant.shift[0]);
}

}  // namespace softdla
