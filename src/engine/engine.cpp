#include "engine.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "error.h"
#include "io_convert.h"
#include "io_layout.h"
#include "memory_plan.h"
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
  plan_residuals_in_place(fusible);
  io_linear_.resize(model_.inputs.size() + model_.outputs.size());
}

// An FP16 residual add fused into the convolution before it writes its output over its other operand
// where that operand dies at the add (ResNet's block input, MobileNetV2's): the fused epilogues read each
// position of the operand before they write the same position of the output (half_output.h, the FP16
// tiles' and SdpChain's stores), and the output's lines are then already in cache, where a separate
// output cost its read for ownership besides the operand's read (ResNet-50's 64 -> 256 at 56 x 56 with
// its add: 1.05 -> 0.65 ms, the same layer without the add 0.55). The engine's own plan: the loadable's
// stays as it is (its checks forbid shared bytes), and the CUDA backend keeps that one.
void Engine::plan_residuals_in_place(const std::vector<int>& fusible) {
  std::vector<int> in_place(model_.ops.size(), -1);
  bool any = false;
  for (size_t i = 0; i + 1 < model_.ops.size(); ++i) {
    const Op& next = model_.ops[i + 1];
    if (!absorbed_[i + 1] || next.inputs.size() != 2 || model_.tensors[next.outputs[0]].dtype != DataType::kFloat16)
      continue;
    const uint32_t other = next.inputs[fusible[i] == 0 ? 1 : 0];
    // Not an operand the convolution itself reads: it would read positions the epilogue already wrote.
    const std::vector<uint32_t>& conv_inputs = model_.ops[i].inputs;
    if (std::find(conv_inputs.begin(), conv_inputs.end(), other) != conv_inputs.end()) continue;
    in_place[i + 1] = int(other), any = true;
  }
  if (!any) return;
  MemoryPlan loadable_plan = std::exchange(model_.memory_plan, plan_memory(model_, in_place));
  // Every fused pair must still be one the plan allows (the convolution's inputs apart from the add's
  // output); otherwise the loadable's plan stays.
  const std::vector<int> still = fusible_next_inputs(model_);
  for (size_t i = 0; i + 1 < model_.ops.size(); ++i)
    if (absorbed_[i + 1] && still[i] != fusible[i]) {
      model_.memory_plan = std::move(loadable_plan);
      return;
    }
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
