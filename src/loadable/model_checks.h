// Semantic checks of a Model: every index in range, sizes consistent with shape/format/type, weights
// of the right length, DLA parameter limits (docs/DLA-LIMITS.md), the op graph acyclic and in execution
// order, the memory plan free of overlaps. Throws Error naming the first problem found.
#pragma once
#include "model.h"

namespace softdla {

void check_model(const Model& m);  // check_graph + check_memory_plan
void check_graph(const Model& m);
void check_memory_plan(const Model& m);

// The DLA's range of each dimension of tensor i (batch, C, H, W); throws Error naming the tensor.
void check_tensor_extents(const Model& m, size_t i);

// The DLA rules of one op (parameter tables, limits) and its output shape; throws Error naming the op.
Shape check_op(const Model& m, const Op& op);

// Helper for checks and execution: which tensors an op reads (data inputs, then element-wise operands).
struct TensorLifetime {
  int first = -1;  // op index producing it (-1: graph input or constant)
  int last = -1;   // last op index reading it
};
std::vector<TensorLifetime> tensor_lifetimes(const Model& m);

// True for tensors the memory plan places in the arena (not I/O, not constants).
std::vector<bool> intermediate_mask(const Model& m);

}  // namespace softdla
