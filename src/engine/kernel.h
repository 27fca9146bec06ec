// What a backend provides: one prepared kernel per op. Kernels read and write linear NCHW tensors in
// the tensor's own data type (fp32: float, fp16: uint16_t bits, int8: int8_t).
#pragma once
#include <memory>
#include <vector>

#include "model.h"

namespace softdla {

class ThreadPool;

struct OpIo {
  std::vector<const void*> inputs;  // one per Op::inputs entry (constants point at their data)
  void* output = nullptr;
};

class OpKernel {
 public:
  virtual ~OpKernel() = default;
  virtual void run(const OpIo& io, ThreadPool& pool) const = 0;
};

namespace cpu {
// Prepares the kernel for model.ops[op_index] (weights converted, tables built). The model must have
// passed check_model().
std::unique_ptr<OpKernel> make_kernel(const Model& model, size_t op_index);
}  // namespace cpu

}  // namespace softdla
