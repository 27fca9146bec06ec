#include "memory_plan.h"

#include <algorithm>
#include <map>

#include "model_checks.h"

namespace softdla {

MemoryPlan plan_memory(const Model& m) {
  const std::vector<TensorLifetime> life = tensor_lifetimes(m);
  const std::vector<bool> inter = intermediate_mask(m);
  MemoryPlan plan;
  plan.offsets.assign(m.tensors.size(), 0);
  // Live blocks, by offset -> (end, last use). First fit in op order: at op i, free what died before i.
  std::map<uint64_t, std::pair<uint64_t, int>> live;
  for (size_t op = 0; op < m.ops.size(); ++op) {
    for (auto it = live.begin(); it != live.end();)
      it = it->second.second < int(op) ? live.erase(it) : std::next(it);
    for (uint32_t t : m.ops[op].outputs) {
      if (!inter[t]) continue;
      const uint64_t bytes = element_count(m.tensors[t].shape) * element_size(m.tensors[t].dtype);
      const uint64_t need = (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
      uint64_t at = 0;
      for (const auto& [start, block] : live) {
        if (start >= at + need) break;
        at = std::max(at, block.first);
      }
      plan.offsets[t] = at;
      live[at] = {at + need, std::max(life[t].last, int(op))};
      plan.arena_size = std::max(plan.arena_size, at + need);
    }
  }
  return plan;
}

}  // namespace softdla
