// Executes a loadable's op graph on the CPU: prepares one kernel per op, owns the intermediate arena laid
// out by the memory plan, converts I/O between the bindings' formats and linear NCHW at the graph
// boundary. The CPU backend (cpu_backend.cpp) wraps it; the runtime and the test entry points reach it
// only through backend.h. The builder's calibration uses it directly.
#pragma once
#include <chrono>
#include <memory>
#include <mutex>
#include <span>
#include <stdexcept>
#include <vector>

#include "aligned_vector.h"
#include "kernel.h"
#include "model.h"

namespace softdla {

// Thrown by Engine::run when the deadline passes (checked between ops).
class TaskTimeout : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct OpTiming {
  double start_ms = 0, end_ms = 0;  // from the start of the run
};

class Engine {
 public:
  explicit Engine(Model model);  // model must have passed check_model() (read_loadable does that)
  ~Engine();

  const Model& model() const { return model_; }
  // Whether op i runs inside op i - 1's kernel (OpKernel::fuse_next); false for an index out of range.
  bool op_fused(size_t i) const { return i < absorbed_.size() && absorbed_[i]; }

  // inputs[i] / outputs[i]: buffers of model().inputs[i].desc.size bytes in the binding's format.
  // Thread-safe; concurrent calls on one Engine run one after another.
  // Stops with TaskTimeout once `deadline` has passed after an op (outputs are then incomplete).
  void run(std::span<const void* const> inputs, std::span<void* const> outputs,
           std::vector<OpTiming>* timings = nullptr,
           std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max()) const;

 private:
  void plan_residuals_in_place();

  Model model_;
  std::vector<std::unique_ptr<OpKernel>> kernels_;
  std::vector<bool> absorbed_;  // op i runs inside op i - 1's kernel (OpKernel::fuse_next)
  mutable std::mutex mutex_;
  mutable AlignedVector<uint8_t> arena_;  // tensors at their plan offsets, 64-byte aligned as the plan's
  mutable std::vector<AlignedVector<uint8_t>> io_linear_;  // linear copies of non-linear I/O tensors
};

}  // namespace softdla
