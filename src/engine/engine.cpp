#include "engine.h"

#include <cstring>

#include "error.h"
#include "io_convert.h"
#include "io_layout.h"
#include "op_fusion.h"
#include "tensor_placement.h"
#include "thread_pool.h"

namespace softdla {

Engine::Engine(Model model) : model_(std::move(model)) {
  for (size_t i = 0; i < model_.ops.size(); ++i) kernels_.push_back(cpu::make_kernel(model_, i));
  // A kernel that can also compute the next op (a convolution and the residual add after it) takes it.
  absorbed_.assign(model_.ops.size(), false);
  const std::vector<int> fusible = fusible_next_inputs(model_);
  for (size_t i = 0; i + 1 < kernels_.size(); ++i)
    if (!absorbed_[i] && fusible[i] >= 0 && kernels_[i]->fuse_next(model_, model_.ops[i + 1], size_t(fusible[i])))
      absorbed_[i + 1] = true;
  io_linear_.resize(model_.inputs.size() + model_.outputs.size());
}

Engine::~Engine() = default;

void Engine::run(std::span<const void* const> inputs, std::span<void* const> outputs,
                 std::vector<OpTiming>* timings, std::chrono::steady_clock::time_point deadline) const {
  if (inputs.size() != model_.inputs.size() || outputs.size() != model_.outputs.size())
    fail("engine run: got ", inputs.size(), " inputs and ", outputs.size(), " outputs; the loadable has ",
         model_.inputs.size(), " and ", model_.outputs.size());
  std::lock_guard<std::mutex> lock(mutex_);
  if (arena_.size() < model_.memory_plan.arena_size) arena_.resize(model_.memory_plan.arena_size);

  std::vector<void*> where = place_tensors(model_, arena_.data(), arena_.size(), [&](size_t c) {
    return static_cast<const void*>(model_.constants[c].data.data());
  });
  auto bind = [&](const IoBinding& io, size_t slot, const void* user) -> IoLayout {
    const Tensor& t = model_.tensors[io.tensor];
    const IoLayout layout = io_layout(t.shape, t.dtype, io.format, model_.target);
    if (io.format == TensorFormat::kLinear) {
      where[io.tensor] = const_cast<void*>(user);  // zero copy
    } else {
      io_linear_[slot].resize(element_count(t.shape) * element_size(t.dtype));
      where[io.tensor] = io_linear_[slot].data();
    }
    return layout;
  };
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i]) fail("engine run: input ", i, " is null");
    const IoBinding& io = model_.inputs[i];
    const IoLayout layout = bind(io, i, inputs[i]);
    if (io.format != TensorFormat::kLinear)
      unpack_to_linear(inputs[i], layout, model_.tensors[io.tensor].shape, where[io.tensor]);
  }
  std::vector<IoLayout> out_layouts;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i]) fail("engine run: output ", i, " is null");
    out_layouts.push_back(bind(model_.outputs[i], inputs.size() + i, outputs[i]));
  }

  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  auto ms_since = [&](Clock::time_point t) { return std::chrono::duration<double, std::milli>(t - t0).count(); };
  if (timings) timings->assign(model_.ops.size(), {});
  ThreadPool& pool = ThreadPool::shared();
  for (size_t i = 0; i < model_.ops.size(); ++i) {
    const Op& op = model_.ops[i];
    const auto start = Clock::now();
    if (!absorbed_[i]) {  // an absorbed op ran inside the previous op's kernel: it takes no time of its own
      OpIo io;
      for (uint32_t t : op.inputs) io.inputs.push_back(where[t]);
      io.output = where[op.outputs[0]];
      if (i + 1 < model_.ops.size() && absorbed_[i + 1]) {
        const Op& next = model_.ops[i + 1];
        for (uint32_t t : next.inputs) io.fused_inputs.push_back(where[t]);
        io.output = where[next.outputs[0]];
      }
      kernels_[i]->run(io, pool);
    }
    const auto end = absorbed_[i] ? start : Clock::now();
    if (timings) (*timings)[i] = {ms_since(start), ms_since(end)};
    if (end > deadline)
      throw TaskTimeout("task ran past its timeout after op " + std::to_string(i) + " '" + op.name + "'");
  }

  for (size_t i = 0; i < outputs.size(); ++i) {
    const IoBinding& io = model_.outputs[i];
    if (io.format != TensorFormat::kLinear)
      pack_from_linear(where[io.tensor], model_.tensors[io.tensor].shape, out_layouts[i], outputs[i]);
  }
}

}  // namespace softdla
