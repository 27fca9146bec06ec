// The CUDA backend (backend.h): a model prepared as the plugin's gpu::Module. In stream order each task
// is enqueued on the caller's stream (its buffers are device memory: the runtime registers nothing else
// on a CUDA handle). Run now (standalone handles, whose NvSciBuf memory is host memory, and the test
// entry points), a task's host buffers go through device buffers the module keeps, on the legacy default
// stream, and the call waits for its outputs.
#include <stdexcept>

#include "backend.h"
#include "gpu_backend.h"
#include "log.h"
#include "statistics_record.h"

namespace softdla {
namespace {

class CudaModule final : public PreparedModule {
 public:
  CudaModule(gpu::Platform& platform, Model model, std::unique_ptr<gpu::Module> module)
      : platform_(platform), model_(std::move(model)), module_(std::move(module)) {}

  ~CudaModule() override {
    module_.reset();  // waits for its tasks in flight
    for (const auto& [ptr, size] : stage_)
      if (ptr) platform_.free_device(ptr);
  }

  const Model& model() const override { return model_; }
  std::string poll_error() override { return module_->poll_error(); }

  void enqueue(std::span<const TaskIo> tasks, std::optional<void*> stream, TaskMonitor& monitor,
               std::mutex* serialize) override {
    std::unique_lock<std::mutex> lock;
    if (serialize) lock = std::unique_lock<std::mutex>(*serialize);
    if (!stream) return run_now(tasks, monitor);
    for (const TaskIo& io : tasks) {
      const TaskMonitor::Start start = monitor.start();
      if (!start.run) {
        // As a faulting DLA: the task's work is not done and the stream fails.
        platform_.fail_stream(*stream, nullptr);
        return;
      }
      module_->enqueue(io.inputs.data(), io.outputs.data(), io.statistics, start.index, *stream);
      monitor.finish(start.index, {});
    }
  }

 private:
  void run_now(std::span<const TaskIo> tasks, TaskMonitor& monitor) {
    std::lock_guard<std::mutex> lock(stage_mutex_);
    for (const TaskIo& io : tasks) {
      const TaskMonitor::Start start = monitor.start();
      if (!start.run) return;
      TaskOutcome outcome;
      try {
        run_staged(io, start.index);
      } catch (const std::exception& e) {
        outcome = {TaskResult::kDeviceFailure, e.what()};
      }
      monitor.finish(start.index, outcome);
      if (outcome.result != TaskResult::kDone) return;
    }
  }

  // Host buffers in, through the module, host buffers out; returns when the outputs are written.
  void run_staged(const TaskIo& io, uint64_t index) {
    std::vector<const void*> inputs;
    std::vector<void*> outputs;
    size_t slot = 0;
    for (size_t i = 0; i < io.inputs.size(); ++i) {
      void* d = stage(slot++, model_.inputs[i].desc.size);
      platform_.copy_async(d, io.inputs[i], model_.inputs[i].desc.size, nullptr);
      inputs.push_back(d);
    }
    for (size_t i = 0; i < io.outputs.size(); ++i) outputs.push_back(stage(slot++, model_.outputs[i].desc.size));
    void* statistics = nullptr;
    const size_t stats_bytes = io.statistics ? statistics_bytes(model_.ops.size()) : 0;
    if (io.statistics) statistics = stage(slot++, stats_bytes);
    module_->enqueue(inputs.data(), outputs.data(), statistics, index, nullptr);
    for (size_t i = 0; i < io.outputs.size(); ++i)
      platform_.copy_async(io.outputs[i], outputs[i], model_.outputs[i].desc.size, nullptr);
    if (io.statistics) platform_.copy_async(io.statistics, statistics, stats_bytes, nullptr);
    platform_.synchronize(nullptr);
    if (const std::string e = module_->poll_error(); !e.empty()) throw std::runtime_error(e);
  }

  // Device buffer `slot`, at least `bytes` large (kept between tasks). Caller holds stage_mutex_.
  void* stage(size_t slot, size_t bytes) {
    if (stage_.size() <= slot) stage_.resize(slot + 1, {nullptr, 0});
    auto& [ptr, size] = stage_[slot];
    if (size < bytes) {
      if (ptr) platform_.free_device(ptr);
      ptr = nullptr, size = 0;
      ptr = platform_.alloc_device(bytes);
      size = bytes;
    }
    return ptr;
  }

  gpu::Platform& platform_;
  Model model_;
  std::unique_ptr<gpu::Module> module_;
  std::mutex stage_mutex_;
  std::vector<std::pair<void*, size_t>> stage_;  // guarded by stage_mutex_
};

class CudaBackend final : public Backend {
 public:
  CudaBackend(gpu::Platform& platform, std::unique_ptr<Backend> fallback)
      : platform_(platform), fallback_(std::move(fallback)) {}

  std::unique_ptr<PreparedModule> prepare(Model model) override {
    std::unique_ptr<gpu::Module> module;
    try {
      module = platform_.load(model);
    } catch (const std::exception& e) {
      if (!fallback_) throw;
      log(LogLevel::kWarn, "the CUDA backend could not prepare this loadable (", e.what(),
          "); its tasks run on the CPU backend");
      return fallback_->prepare(std::move(model));
    }
    return std::make_unique<CudaModule>(platform_, std::move(model), std::move(module));
  }

  void wait_idle() override {
    if (fallback_) fallback_->wait_idle();
  }

 private:
  gpu::Platform& platform_;
  std::unique_ptr<Backend> fallback_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(gpu::Platform& platform, std::unique_ptr<Backend> fallback) {
  return std::make_unique<CudaBackend>(platform, std::move(fallback));
}

}  // namespace softdla
