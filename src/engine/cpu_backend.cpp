// The CPU backend (backend.h): a model prepared as an Engine; tasks run now on the calling thread, or in
// CUDA stream order through StreamOrder where the user handle has a GPU beside it.
#include <new>
#include <stdexcept>

#include "cpu_backend.h"
#include "statistics_record.h"

namespace softdla {

bool TaskIo::any_on_device() const {
  for (bool d : input_on_device)
    if (d) return true;
  for (bool d : output_on_device)
    if (d) return true;
  return statistics_on_device;
}

namespace cpu {
namespace {

void write_statistics(void* buffer, const std::vector<OpTiming>& timings, uint64_t task_index, double task_ms) {
  auto* out = static_cast<uint8_t*>(buffer);
  write_statistics_header(out, uint32_t(timings.size()), task_index, task_ms);
  for (size_t i = 0; i < timings.size(); ++i)
    write_statistics_layer(out, uint32_t(i), timings[i].start_ms, timings[i].end_ms);
}

// One task on the engine; the exceptions Engine::run may throw become the outcome.
TaskOutcome run_one(const Engine& engine, const TaskIo& io, const TaskMonitor::Start& start,
                    std::chrono::steady_clock::time_point t0) {
  std::vector<OpTiming> timings;
  try {
    engine.run(io.inputs, io.outputs, io.statistics ? &timings : nullptr, start.deadline);
  } catch (const TaskTimeout& e) {
    return {TaskResult::kTimedOut, e.what()};
  } catch (const std::bad_alloc&) {
    return {TaskResult::kOutOfMemory, "out of host memory while running a task"};
  } catch (const std::exception& e) {
    return {TaskResult::kRejected, e.what()};
  }
  if (io.statistics)
    write_statistics(io.statistics, timings, start.index,
                     std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  return {};
}

class CpuModule final : public PreparedModule {
 public:
  CpuModule(Model model, StreamOrder* stream_order)
      : engine_(std::make_shared<const Engine>(std::move(model))), stream_order_(stream_order) {}

  const Model& model() const override { return engine_->model(); }
  bool op_fused(size_t op) const override { return engine_->op_fused(op); }

  void enqueue(std::span<const TaskIo> tasks, std::optional<void*> stream, TaskMonitor& monitor,
               std::mutex* serialize) override {
    if (stream) {
      if (!stream_order_) throw std::logic_error("CPU backend: stream order needs a CUDA device");
      stream_order_->enqueue(engine_, tasks, *stream, monitor, serialize);
      return;
    }
    std::unique_lock<std::mutex> lock;
    if (serialize) lock = std::unique_lock<std::mutex>(*serialize);
    run_tasks(*engine_, tasks, monitor);
  }

 private:
  // Shared with batches still waiting in a CUDA stream, so unloading does not wait for them.
  std::shared_ptr<const Engine> engine_;
  StreamOrder* stream_order_;  // the backend's; null without a GPU
};

class CpuBackend final : public Backend {
 public:
  explicit CpuBackend(gpu::StreamOps* streams) {
    if (streams) stream_order_ = std::make_unique<StreamOrder>(*streams);
  }
  std::unique_ptr<PreparedModule> prepare(Model model) override {
    return std::make_unique<CpuModule>(std::move(model), stream_order_.get());
  }
  void wait_idle() override {
    if (stream_order_) stream_order_->wait_idle();
  }

 private:
  std::unique_ptr<StreamOrder> stream_order_;
};

}  // namespace

bool run_tasks(const Engine& engine, std::span<const TaskIo> tasks, TaskMonitor& monitor) {
  for (const TaskIo& io : tasks) {
    const auto t0 = std::chrono::steady_clock::now();
    const TaskMonitor::Start start = monitor.start();
    if (!start.run) return false;
    const TaskOutcome outcome = run_one(engine, io, start, t0);
    monitor.finish(start.index, outcome);
    if (outcome.result != TaskResult::kDone) return false;
  }
  return true;
}

}  // namespace cpu

std::unique_ptr<Backend> make_cpu_backend(gpu::StreamOps* streams) {
  return std::make_unique<cpu::CpuBackend>(streams);
}

}  // namespace softdla
