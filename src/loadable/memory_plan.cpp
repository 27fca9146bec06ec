#include "memory_plan.h"

#include <algorithm>
#include <map>

#include "model_checks.h"

namespace softdla {

MemoryPlan plan_memory(const Model& m, const std::vector<int>& in_place, const std::vector<bool>& inputs_through_next) {
  std::vector<TensorLifetime> life = tensor_lifetimes(m);
  for (size_t op = 0; op < inputs_through_next.size() && op + 1 < m.ops.size(); ++op)
    if (inputs_through_next[op])
      for (uint32_t t : m.ops[op].inputs) life[t].last = std::max(life[t].last, int(op) + 1);
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
      // The input it may overwrite, when that input ends here and has its size: its block, kept alive.
      const int src = in_place.empty() ? -1 : in_place[op];
      if (src >= 0 && inter[size_t(src)] && life[size_t(src)].last == int(op) &&
          element_count(m.tensors[size_t(src)].shape) * element_size(m.tensors[size_t(src)].dtype) == bytes) {
        const auto block = live.find(plan.offsets[size_t(src)]);
        if (block != live.end()) {
          plan.offsets[t] = block->first;
          block->second.second = std::max(life[t].last, int(op));
          continue;
        }
      }
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
