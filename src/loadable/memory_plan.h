// Places intermediate tensors in one arena, reusing the space of tensors no longer needed.
#pragma once
#include "model.h"

namespace softdla {
inline constexpr uint64_t kArenaAlignment = 64;
MemoryPlan plan_memory(const Model& m);  // m must already pass the graph checks
}  // namespace softdla
