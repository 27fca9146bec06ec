// Which consecutive ops a backend may run as one kernel: op i and op i + 1 when i's only reader is
// i + 1 (so the intermediate between them need never be written) and the fused kernel, which writes
// i + 1's output while it reads i's inputs, cannot overwrite them (the memory plan may give i + 1's
// output the bytes of i's inputs, as their lifetimes do not overlap). Whether the pair really fuses
// is the backend's kernel's choice; this only says where it may.
#pragma once
#include <vector>

#include "model.h"

namespace softdla {

// For each op i: the index in ops[i + 1].inputs (0 or 1) of the tensor op i computes, when the pair
// may fuse; -1 otherwise (and for the last op).
std::vector<int> fusible_next_inputs(const Model& m);

}  // namespace softdla
