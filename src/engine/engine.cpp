#include "engine.h"

#include <algorithm>
#include <cstring>
#include <variant>

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
  plan_residuals_in_place();
  // A kernel that can also compute the next op (a convolution and the residual add after it) takes it.
  absorbed_.assign(model_.ops.size(), false);
  const std::vector<int> fusible = fusible_next_inputs(model_);
  for (size_t i = 0; i + 1 < kernels_.size(); ++i)
    if (!absorbed_[i] && fusible[i] >= 0 && kernels_[i]->fuse_next(model_, model_.ops[i + 1], size_t(fusible[i])))
      absorbed_[i + 1] = true;
  io_linear_.resize(model_.inputs.size() + model_.outputs.size());
}

namespace {
constexpr uint64_t kInPlaceMinBytes = uint64_t(1) << 20;  // half of a 2 MB L2 (ResNet-50's 56 x 56 adds: 1.6 MB)
}  // namespace

// An FP16 two-input SDP op (a residual add) right after the op that computes one of its inputs writes its
// output over its other input where that input dies there: the engine's own memory plan, made before the
// fusion check sees it. The loadable's plan stays as it is (its checks forbid shared bytes) and the CUDA
// backend keeps that one. Safe because every CPU kernel such an op runs in reads each position of that
// input before it writes the same position of the output: the convolutions' fused FP16 epilogues
// (half_output.h, the FP16 tiles' and SdpChain's stores) and the SDP op's own plane-by-plane pass; an
// input the previous op itself reads is left alone (a fused convolution would read positions its
// epilogue already wrote; the fusion check, which sees this plan, refuses such a pair too). Two gains:
// the output's lines are in cache when written (a separate output cost its read for ownership besides
// the operand's: ResNet-50's 64 -> 256 at 56 x 56 with its add 1.05 -> 0.65 ms, the layer without the
// add 0.55), and an add whose loadable plan put its output on the convolution's input (ResNet-18's
// blocks) no longer fails the fusion check.
//
// Whenever the engine plans its own memory, or the loadable's plan put a residual add's output over the
// inputs of the op before it (which refuses the pair's fusion), every such pair keeps that op's inputs
// alive through the add (plan_memory's inputs_through_next): a plan made for in-place adds elsewhere had
// put ResNet-50's second-stage add over its downsample's input, so that add ran as a pass of its own.
void Engine::plan_residuals_in_place() {
  std::vector<uint32_t> readers(model_.tensors.size(), 0);
  for (const Op& op : model_.ops)
    for (uint32_t t : op.inputs) ++readers[t];
  for (const IoBinding& io : model_.outputs) ++readers[io.tensor];
  const std::vector<int> fusible = fusible_next_inputs(model_);  // under the loadable's plan
  std::vector<int> in_place(model_.ops.size(), -1);
  std::vector<bool> keep_inputs(model_.ops.size(), false);  // op i + 1 is a residual add of op i's output
  bool any = false;
  for (size_t i = 0; i + 1 < model_.ops.size(); ++i) {
    const Op &op = model_.ops[i], &next = model_.ops[i + 1];
    if (!std::holds_alternative<SdpParams>(next.params) || next.inputs.size() != 2 || op.outputs.size() != 1) continue;
    const Tensor& y = model_.tensors[next.outputs[0]];
    const uint32_t mine = op.outputs[0];
    if (readers[mine] != 1 || (next.inputs[0] != mine && next.inputs[1] != mine)) continue;
    keep_inputs[i] = true;
    if (fusible[i] < 0) any = true;  // refused under the loadable's plan: the plan is the only obstacle it can lift
    if (y.dtype != DataType::kFloat16) continue;
    const uint32_t other = next.inputs[next.inputs[0] == mine ? 1 : 0];
    const Tensor& o = model_.tensors[other];
    if (other == mine || o.shape != y.shape || o.dtype != y.dtype) continue;
    if (std::find(op.inputs.begin(), op.inputs.end(), other) != op.inputs.end()) continue;
    // Where the pair fuses under the loadable's plan too, only an operand beyond the core's cache gains
    // (MobileNetV2's, 16 to 150 KB, measured no faster written over).
    if (fusible[i] >= 0 && element_count(o.shape) * element_size(o.dtype) < kInPlaceMinBytes) continue;
    in_place[i + 1] = int(other), any = true;
  }
  if (any) model_.memory_plan = plan_memory(model_, in_place, keep_inputs);
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
