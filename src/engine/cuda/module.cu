// A loadable on the GPU: constants uploaded once, one GpuOp per op, the memory plan's arena and the ops'
// scratch in device memory. A task is one launch sequence (unpack inputs, ops in order, pack outputs),
// captured once per set of I/O addresses into a CUDA graph and replayed on the caller's stream.
#include <list>
#include <mutex>
#include <stdexcept>

#include "channels_last.h"
#include "gpu_backend.h"
#include "gpu_module.h"
#include "io_device.cuh"
#include "io_layout.h"
#include "model_checks.h"
#include "nvtx_range.h"
#include "op_fusion.h"
#include "statistics_record.h"
#include "tensor_placement.h"

namespace softdla::gpu {
namespace {

constexpr size_t kWorkspaceBytes = size_t(32) << 20;  // cuBLASLt workspace
constexpr size_t kGraphCacheSize = 8;

__device__ inline uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void stamp_kernel(uint64_t* slot) { *slot = global_ns(); }

// stamps: task start, then (start, end) per op. Writes docs/RUNTIME.md's statistics record.
__global__ void statistics_kernel(const uint64_t* stamps, uint32_t ops, uint64_t task_index, uint8_t* out) {
  const uint64_t t0 = stamps[0];
  const uint64_t t_end = global_ns();
  write_statistics_header(out, ops, task_index, double(t_end - t0) * 1e-6);
  for (uint32_t i = 0; i < ops; ++i)
    write_statistics_layer(out, i, double(stamps[1 + 2 * i] - t0) * 1e-6, double(stamps[2 + 2 * i] - t0) * 1e-6);
}

class GpuModule final : public Module {
 public:
  explicit GpuModule(const Model& m) : model_(m) {
    SOFTDLA_LT(cublasLtCreate(&ctx_.lt));
    workspace_ = DeviceBuffer(kWorkspaceBytes);
    ctx_.workspace = workspace_.get(), ctx_.workspace_bytes = kWorkspaceBytes;
    for (const Constant& c : model_.constants) constants_.emplace_back(c.data.data(), c.data.size());
    ctx_.channels_last = plan_channels_last(model_);
    size_t scratch = 0;
    for (size_t i = 0; i < model_.ops.size(); ++i) {
      ops_.push_back(make_gpu_op(model_, i, ctx_));
      scratch = std::max(scratch, ops_.back()->scratch_bytes());
    }
    fuse_ops();
    scratch_ = DeviceBuffer(scratch);
    arena_ = DeviceBuffer(std::max<uint64_t>(model_.memory_plan.arena_size, 1));
    // Linear copies of I/O tensors bound in other formats.
    for (const auto* list : {&model_.inputs, &model_.outputs})
      for (const IoBinding& io : *list) {
        const Tensor& t = model_.tensors[io.tensor];
        io_linear_.emplace_back(io.format == TensorFormat::kLinear ? 0 : element_count(t.shape) * element_size(t.dtype));
      }
    stamps_ = DeviceBuffer(sizeof(uint64_t) * (1 + 2 * model_.ops.size()));
    SOFTDLA_CUDA(cudaStreamCreateWithFlags(&capture_stream_, cudaStreamNonBlocking));
    SOFTDLA_CUDA(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
  }

  ~GpuModule() override {
    cudaEventSynchronize(done_);  // tasks in flight still use the buffers
    for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);
    cudaEventDestroy(done_);
    cudaStreamDestroy(capture_stream_);
    ops_.clear();
    cublasLtDestroy(ctx_.lt);
  }

  void enqueue(const void* const* inputs, void* const* outputs, void* statistics, uint64_t task_index,
               void* stream_ptr) override {
    const cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
    const NvtxRange range(statistics ? "softdla task (layer-wise statistics)" : "softdla task");
    std::lock_guard<std::mutex> lock(mutex_);
    // Tasks of this module share the arena: each waits for the previous one, whatever its stream.
    SOFTDLA_CUDA(cudaStreamWaitEvent(stream, done_, 0));
    if (statistics) {
      record(inputs, outputs, static_cast<uint8_t*>(statistics), task_index, stream);
    } else {
      SOFTDLA_CUDA(cudaGraphLaunch(graph_for(inputs, outputs), stream));
    }
    SOFTDLA_CUDA(cudaEventRecord(done_, stream));
  }

  std::string poll_error() override {
    const cudaError_t e = cudaEventQuery(done_);
    if (e == cudaSuccess || e == cudaErrorNotReady) return {};
    return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
  }

 private:
  using Key = std::vector<const void*>;

  // Lets each op take over the next one where its kernels can compute both (a convolution and the
  // residual-add SDP op after it). The intermediate between them is then never written.
  void fuse_ops() {
    absorbed_.assign(ops_.size(), 0);
    const std::vector<int> fusible = fusible_next_inputs(model_);
    for (size_t i = 0; i + 1 < ops_.size(); ++i)
      if (!absorbed_[i] && fusible[i] >= 0 && ops_[i]->fuse_next(model_, model_.ops[i + 1], size_t(fusible[i]), ctx_))
        absorbed_[i + 1] = 1;
  }

  cudaGraphExec_t graph_for(const void* const* inputs, void* const* outputs) {
    Key key(inputs, inputs + model_.inputs.size());
    key.insert(key.end(), outputs, outputs + model_.outputs.size());
    for (auto it = graphs_.begin(); it != graphs_.end(); ++it)
      if (it->first == key) {
        graphs_.splice(graphs_.begin(), graphs_, it);  // most recently used first
        return it->second;
      }
    SOFTDLA_CUDA(cudaStreamBeginCapture(capture_stream_, cudaStreamCaptureModeThreadLocal));
    cudaGraph_t graph = nullptr;
    try {
      record(inputs, outputs, nullptr, 0, capture_stream_);
    } catch (...) {
      cudaStreamEndCapture(capture_stream_, &graph);
      if (graph) cudaGraphDestroy(graph);
      throw;
    }
    SOFTDLA_CUDA(cudaStreamEndCapture(capture_stream_, &graph));
    cudaGraphExec_t exec = nullptr;
    const cudaError_t st = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    check(st, "cudaGraphInstantiate");
    if (graphs_.size() == kGraphCacheSize) {
      // The evicted graph may still run on some stream: wait for this module's last task first.
      SOFTDLA_CUDA(cudaEventSynchronize(done_));
      cudaGraphExecDestroy(graphs_.back().second);
      graphs_.pop_back();
    }
    graphs_.emplace_front(std::move(key), exec);
    return exec;
  }

  // The task's launch sequence on `stream`. With `statistics`, each op is bracketed by time stamps
  // and the record is written at the end.
  void record(const void* const* inputs, void* const* outputs, uint8_t* statistics, uint64_t task_index,
              cudaStream_t stream) const {
    uint64_t* stamps = stamps_.as<uint64_t>();
    if (statistics) stamp(stamps, stream);
    std::vector<void*> where = place_tensors(model_, arena_.as<uint8_t>(), arena_.bytes(),
                                                   [&](size_t c) { return constants_[c].get(); });
    const size_t nin = model_.inputs.size();
    for (size_t i = 0; i < nin; ++i) {
      const IoBinding& io = model_.inputs[i];
      const Tensor& t = model_.tensors[io.tensor];
      if (io.format == TensorFormat::kLinear) {
        where[io.tensor] = const_cast<void*>(inputs[i]);  // read only
      } else {
        where[io.tensor] = io_linear_[i].get();
        enqueue_unpack(inputs[i], io_layout(t.shape, t.dtype, io.format, model_.target), t.shape, io_linear_[i].get(),
                       stream);
      }
    }
    for (size_t i = 0; i < model_.outputs.size(); ++i) {
      const IoBinding& io = model_.outputs[i];
      where[io.tensor] = io.format == TensorFormat::kLinear ? outputs[i] : io_linear_[nin + i].get();
    }
    for (size_t i = 0; i < ops_.size(); ++i) {
      if (statistics) stamp(stamps + 1 + 2 * i, stream);
      if (!absorbed_[i]) {
        const Op& op = model_.ops[i];
        const NvtxRange range(op.name.c_str());  // the layer's name, as in the statistics and `softdla profile`
        GpuOpIo io;
        for (uint32_t t : op.inputs) io.inputs.push_back(where[t]);
        io.output = where[op.outputs[0]];
        io.scratch = scratch_.get();
        if (i + 1 < ops_.size() && absorbed_[i + 1]) {  // this op's kernels also compute the next op
          const Op& next = model_.ops[i + 1];
          for (uint32_t t : next.inputs) io.fused_inputs.push_back(where[t]);
          io.output = where[next.outputs[0]];
        }
        ops_[i]->enqueue(io, ctx_, stream);
      }
      if (statistics) stamp(stamps + 2 + 2 * i, stream);
    }
    for (size_t i = 0; i < model_.outputs.size(); ++i) {
      const IoBinding& io = model_.outputs[i];
      const Tensor& t = model_.tensors[io.tensor];
      if (io.format != TensorFormat::kLinear)
        enqueue_pack(io_linear_[nin + i].get(), t.shape, io_layout(t.shape, t.dtype, io.format, model_.target),
                     outputs[i], stream);
    }
    if (statistics) {
      statistics_kernel<<<1, 1, 0, stream>>>(stamps, uint32_t(ops_.size()), task_index, statistics);
      check_launch("statistics_kernel");
    }
  }

  static void stamp(uint64_t* slot, cudaStream_t stream) {
    stamp_kernel<<<1, 1, 0, stream>>>(slot);
    check_launch("stamp_kernel");
  }

  Model model_;
  OpContext ctx_;
  DeviceBuffer workspace_, scratch_, arena_, stamps_;
  std::vector<DeviceBuffer> constants_, io_linear_;
  std::vector<std::unique_ptr<GpuOp>> ops_;
  std::vector<uint8_t> absorbed_;  // 1: computed by the previous op's kernels (fuse_ops)
  cudaStream_t capture_stream_ = nullptr;
  cudaEvent_t done_ = nullptr;
  std::mutex mutex_;
  std::list<std::pair<Key, cudaGraphExec_t>> graphs_;
};

}  // namespace

std::unique_ptr<Module> load_module(const Model& m) { return std::make_unique<GpuModule>(m); }

}  // namespace softdla::gpu
