// Where each tensor of a model lives during a run, for every backend: constants wherever the backend
// keeps them, intermediates in the arena at their memory-plan offset. The caller then binds the I/O
// tensors (user buffers, or linear copies of formatted ones).
#pragma once
#include <cstdint>
#include <vector>

#include "model.h"

namespace softdla {

// constant_data(i) returns the backend's copy of Model::constants[i] (only ever read by the kernels;
// the pointers are non-const because op outputs come from the same table).
template <class ConstantData>
std::vector<void*> place_tensors(const Model& m, uint8_t* arena, uint64_t arena_size, ConstantData&& constant_data) {
  std::vector<void*> where(m.tensors.size(), nullptr);
  for (size_t t = 0; t < m.tensors.size(); ++t) {
    const Tensor& tensor = m.tensors[t];
    if (tensor.constant >= 0) where[t] = const_cast<void*>(static_cast<const void*>(constant_data(size_t(tensor.constant))));
    else if (m.memory_plan.offsets[t] <= arena_size)  // I/O slots may hold any value; bound by the caller
      where[t] = arena + m.memory_plan.offsets[t];
  }
  return where;
}

}  // namespace softdla
