// Places intermediate tensors in one arena, reusing the space of tensors no longer needed.
#pragma once
#include <vector>

#include "model.h"

namespace softdla {
inline constexpr uint64_t kArenaAlignment = 64;
// m must already pass the graph checks. in_place (empty, or one entry per op): an input tensor of op i
// whose bytes op i's output may take when that input dies at op i and has the output's size, or -1. Only
// for a backend whose kernel for op i reads each position of that input before it writes the same
// position of its output (a fused residual add): such a plan breaks the loadable checks' rule that no
// two tensors alive at the same op share bytes, so it is never written into a loadable.
// inputs_through_next (empty, or one entry per op): op i's inputs stay alive through op i + 1, so that
// op i + 1's output never takes their bytes: a backend that runs op i + 1 inside op i's kernel (a
// convolution with the residual add after it) reads them while it writes that output.
MemoryPlan plan_memory(const Model& m, const std::vector<int>& in_place = {},
                       const std::vector<bool>& inputs_through_next = {});
}  // namespace softdla
