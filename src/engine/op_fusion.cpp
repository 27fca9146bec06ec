#include "op_fusion.h"

#include "model_checks.h"

namespace softdla {

std::vector<int> fusible_next_inputs(const Model& m) {
  std::vector<int> fusible(m.ops.size(), -1);
  std::vector<uint32_t> readers(m.tensors.size(), 0);
  for (const Op& op : m.ops)
    for (uint32_t t : op.inputs) ++readers[t];
  for (const IoBinding& io : m.outputs) ++readers[io.tensor];
  const std::vector<bool> in_arena = intermediate_mask(m);
  auto bytes = [&](uint32_t t) { return element_count(m.tensors[t].shape) * element_size(m.tensors[t].dtype); };
  auto overlap = [&](uint32_t a, uint32_t b) {
    if (!in_arena[a] || !in_arena[b]) return false;
    const uint64_t a0 = m.memory_plan.offsets[a], b0 = m.memory_plan.offsets[b];
    return a0 < b0 + bytes(b) && b0 < a0 + bytes(a);
  };
  for (size_t i = 0; i + 1 < m.ops.size(); ++i) {
    const Op &op = m.ops[i], &next = m.ops[i + 1];
    // The first of next's inputs, or (a residual add whose other operand came earlier) the second.
    size_t input = 0;
    while (input < next.inputs.size() && input < 2 && next.inputs[input] != op.outputs[0]) ++input;
    if (input == next.inputs.size() || input == 2 || readers[op.outputs[0]] != 1) continue;
    bool disjoint = true;
    for (uint32_t in : op.inputs) disjoint = disjoint && !overlap(in, next.outputs[0]);
    if (disjoint) fusible[i] = int(input);
  }
  return fusible;
}

}  // namespace softdla
