// CPU tasks in CUDA stream order (cpu_backend.h): a GPU machine whose handle computes on the CPU
// (SOFTDLA_BACKEND=cpu, or a loadable the CUDA backend could not prepare) and was given a stream or
// device buffers.
#include <chrono>
#include <thread>

#include "cpu_backend.h"
#include "statistics_record.h"

namespace softdla::cpu {

struct StreamOrder::Batch {
  gpu::StreamOps* ops = nullptr;
  std::shared_ptr<const Engine> engine;
  std::vector<TaskIo> tasks;  // device buffers replaced by their pinned staging
  TaskMonitor* monitor = nullptr;
  std::mutex* serialize = nullptr;
  uint32_t* fault_flag = nullptr;
  std::vector<void*> pinned;
  std::atomic<bool> finished{false};
  // Set when enqueueing failed after run_batch was queued (mark_finished may never come): the batch
  // is then done once run_batch has run, or once the context is dead and will run nothing more.
  bool abandoned = false;
  std::atomic<bool> ran{false};

  bool done(gpu::StreamOps& stream_ops) const {
    return finished || (abandoned && (ran || !stream_ops.context_usable()));
  }

  ~Batch() {
    for (void* p : pinned) ops->free_pinned(p);
  }
};

namespace {

// Host functions: the first runs the batch, the second marks its staging free (the copies back that
// sit between them on the stream have then completed).
void run_batch(void* data) {
  auto* b = static_cast<StreamOrder::Batch*>(data);
  std::unique_lock<std::mutex> lock;
  if (b->serialize) lock = std::unique_lock<std::mutex>(*b->serialize);
  if (!run_tasks(*b->engine, b->tasks, *b->monitor)) *b->fault_flag = 1;
  b->ran = true;
}

void mark_finished(void* data) { static_cast<StreamOrder::Batch*>(data)->finished = true; }

}  // namespace

StreamOrder::StreamOrder(gpu::StreamOps& ops) : ops_(ops) {}

StreamOrder::~StreamOrder() {
  wait_idle();
  // A batch's fault kernel follows its last host function on the stream; freeing pinned memory waits
  // for the device (cudaFreeHost synchronizes), so no kernel is left to read the flag.
  if (fault_flag_) ops_.free_pinned(fault_flag_);
}

void StreamOrder::enqueue(std::shared_ptr<const Engine> engine, std::span<const TaskIo> tasks, void* stream,
                          TaskMonitor& monitor, std::mutex* serialize) {
  auto batch = std::make_unique<Batch>();
  batch->ops = &ops_;
  batch->monitor = &monitor;
  batch->serialize = serialize;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    reap(false);
    if (!fault_flag_) {
      fault_flag_ = static_cast<uint32_t*>(ops_.alloc_pinned(sizeof(uint32_t)));
      *fault_flag_ = 0;
    }
    batch->fault_flag = fault_flag_;
  }
  struct CopyBack {
    void* device;
    const void* host;
    size_t bytes;
  };
  std::vector<CopyBack> copy_back;
  auto stage = [&](size_t bytes) {
    batch->pinned.push_back(ops_.alloc_pinned(bytes));
    return batch->pinned.back();
  };
  const Model& m = engine->model();
  batch->tasks.assign(tasks.begin(), tasks.end());
  for (TaskIo& t : batch->tasks) {
    for (size_t i = 0; i < t.inputs.size(); ++i)
      if (i < t.input_on_device.size() && t.input_on_device[i]) {
        void* h = stage(m.inputs[i].desc.size);
        ops_.copy_async(h, t.inputs[i], m.inputs[i].desc.size, stream);
        t.inputs[i] = h;
      }
    for (size_t i = 0; i < t.outputs.size(); ++i)
      if (i < t.output_on_device.size() && t.output_on_device[i]) {
        void* h = stage(m.outputs[i].desc.size);
        copy_back.push_back({t.outputs[i], h, m.outputs[i].desc.size});
        t.outputs[i] = h;
      }
    if (t.statistics && t.statistics_on_device) {
      const size_t bytes = statistics_bytes(m.ops.size());
      void* h = stage(bytes);
      copy_back.push_back({t.statistics, h, bytes});
      t.statistics = h;
    }
  }
  batch->engine = std::move(engine);
  // If this throws, nothing on the stream refers to the batch (freeing its pinned staging waits for the
  // input copies already queued).
  ops_.host_call(stream, run_batch, batch.get());
  try {
    for (const CopyBack& c : copy_back) ops_.copy_async(c.device, c.host, c.bytes, stream);
    ops_.host_call(stream, mark_finished, batch.get());
    ops_.fail_stream(stream, fault_flag_);
  } catch (...) {  // run_batch is queued and will read the batch: keep it until it has run
    batch->abandoned = true;
    std::lock_guard<std::mutex> lock(mutex_);
    batches_.push_back(std::move(batch));
    throw;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  batches_.push_back(std::move(batch));
}

void StreamOrder::wait_idle() {
  std::lock_guard<std::mutex> lock(mutex_);
  reap(true);
}

void StreamOrder::reap(bool wait_all) {
  // A failed CUDA context runs no queued host function: those batches will never finish.
  if (wait_all && !batches_.empty() && !ops_.context_usable()) return batches_.clear();
  for (auto it = batches_.begin(); it != batches_.end();) {
    if (wait_all)
      while (!(*it)->done(ops_)) std::this_thread::sleep_for(std::chrono::microseconds(100));
    if ((*it)->done(ops_)) it = batches_.erase(it);
    else ++it;
  }
}

}  // namespace softdla::cpu
