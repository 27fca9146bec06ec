// The SDP post-processing stage (docs/NUMERICS.md §SDP) applied to a run of values that share one
// (n, c): conv/deconv accumulators or the elements of a standalone SDP op.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "model.h"

namespace softdla::cpu {

// One per-channel float step (bias, scale, PReLU, ReLU, clip) with its channel's operand: what the
// AVX-512 fp16 epilogues apply in registers.
struct ChannelStep {
  SdpKind kind;
  float operand, lo, hi;
};
constexpr size_t kMaxChannelSteps = 8;  // the most steps one pass fuses

// Rows of fp32 values through per-channel steps and stored as fp16: row r holds `count` values at
// v + r * v_stride, takes the steps before[r * n_before, (r + 1) * n_before) and is stored at
// out + r * out_stride; with `other` (a residual add), each result is rounded to fp16 first (as an unfused
// store), added to other[r * other_stride + i] and taken through after[r * n_after, ...). The bits of
// run_float then floats_to_halves (and, with `other`, of the add's own chain). AVX-512 only.
struct HalfRows {
  const float* v;
  size_t v_stride, rows, count;
  uint16_t* out;
  size_t out_stride;
  const ChannelStep* before;
  size_t n_before;
  const uint16_t* other = nullptr;
  size_t other_stride = 0;
  const ChannelStep* after = nullptr;
  size_t n_after = 0;
};
void channel_steps_to_halves(const HalfRows& rows);

class SdpChain {
 public:
  SdpChain(const Model& m, const Op& op, const SdpParams& p);

  // Second-tensor operands of element-wise steps, in op input order (io.inputs[1..]).
  using Operands = const void* const*;

  // INT8: v holds count int32-range values of channel c, image n, starting at spatial index hw0.
  // Writes the int8 results to out.
  void run_int8(int64_t* v, size_t count, uint32_t n, uint32_t c, size_t hw0, Operands ops,
                int8_t* out) const;
  // Float: v holds fp32 values; results stay in v (the caller stores them in fp32 or fp16).
  void run_float(float* v, size_t count, uint32_t n, uint32_t c, size_t hw0, Operands ops) const;

  // run_float, then the fp16 store of the results into out, in one pass (registers only), for chains
  // of per-channel steps (bias, scale, PReLU, ReLU, clip) on AVX-512, or AVX2 with F16C: the same bits
  // as run_float and floats_to_halves. False, having done nothing, for any other chain or path.
  bool run_float_to_halves(const float* v, size_t count, uint32_t c, uint16_t* out) const;

  // A residual add's chain (an element-wise add of a second tensor of the output's shape first, then
  // per-channel steps) run inside the convolution that computes one of the add's inputs: `mine` (that
  // convolution's fp32 sums) through the convolution's chain `before` (per-channel steps only), rounded
  // to fp16 as the unfused graph stores it, added to `other` (the add's other input, fp16), through the
  // remaining steps and stored as fp16, all in registers: the same bits as the convolution's store
  // followed by the add's own kernel (fp32 addition commutes). Whether the two chains have that form
  // and this CPU the path (AVX-512):
  bool residual_halves_form(const SdpChain& before) const;
  void run_residual_halves(const SdpChain& before, const float* mine, const uint16_t* other, size_t count,
                           uint32_t c, uint16_t* out) const;
  // Only per-channel steps (bias, scale, PReLU, ReLU, clip), at most as many as one pass fuses.
  bool channel_steps_only() const;
  // The chain as channel steps for each of `channels` channels, [channel][step] (steps per channel:
  // size() / channels); false for a chain that is not channel steps only. skip_first leaves out the
  // first step (a residual add's element-wise add, run by the kernel itself).
  bool channel_steps(uint32_t channels, std::vector<ChannelStep>& out, bool skip_first = false) const;

  bool empty() const { return steps_.empty(); }

 private:
  struct Step {
    SdpStep s;
    size_t operand_slot = 0;   // index into Operands for element-wise steps
    Shape operand_shape{};
  };
  bool channel_steps_from(size_t first) const;  // steps [first, end) are channel steps, few enough
  const void* operand_row(const Step& st, Operands ops, uint32_t n, uint32_t c, size_t hw0,
                          bool& broadcast_hw) const;
  std::vector<Step> steps_;
  Requant requant_;
  bool has_lut_ = false;
  std::array<int8_t, 256> lut_{};
  DataType dtype_;
  uint32_t hw_ = 1;
};

}  // namespace softdla::cpu
