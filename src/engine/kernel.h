// What a backend provides: one prepared kernel per op. Kernels read and write linear NCHW tensors in
// the tensor's own data type (fp32: float, fp16: uint16_t bits, int8: int8_t).
#pragma once
#include <memory>
#include <vector>

#include "model.h"

namespace softdla {

class ThreadPool;

// Calls fn with a null pointer of a tensor's storage type: float, or uint16_t (the bits) for fp16.
template <class Fn>
void with_float_storage(DataType t, Fn&& fn) {
  if (t == DataType::kFloat16) fn(static_cast<uint16_t*>(nullptr));
  else fn(static_cast<float*>(nullptr));
}
// The same, with int8_t for INT8 tensors.
template <class Fn>
void with_storage(DataType t, Fn&& fn) {
  if (t == DataType::kInt8) fn(static_cast<int8_t*>(nullptr));
  else with_float_storage(t, fn);
}

// Index into Op::inputs of the second operand of an element-wise SDP step.
inline size_t eltwise_operand_slot(const Op& op, int32_t tensor) {
  for (size_t i = 1; i < op.inputs.size(); ++i)
    if (op.inputs[i] == uint32_t(tensor)) return i;
  return op.inputs.size();  // not reached for a checked model
}

struct OpIo {
  std::vector<const void*> inputs;  // one per Op::inputs entry (constants point at their data)
  void* output = nullptr;           // the next op's output when fuse_next() took it
  std::vector<const void*> fused_inputs;  // the next op's inputs, when fuse_next() took it
};

class OpKernel {
 public:
  virtual ~OpKernel() = default;
  // Takes over `next`, the following op, whose input `input` is this op's output and read by nothing
  // else (op_fusion.h): run() then computes next's output and next is not run. False when it cannot.
  virtual bool fuse_next(const Model& /*m*/, const Op& /*next*/, size_t /*input*/) { return false; }
  virtual void run(const OpIo& io, ThreadPool& pool) const = 0;
};

namespace cpu {
// Prepares the kernel for model.ops[op_index] (weights converted, tables built). The model must have
// passed check_model().
std::unique_ptr<OpKernel> make_kernel(const Model& model, size_t op_index);
}  // namespace cpu

}  // namespace softdla
