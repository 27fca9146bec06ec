// CPU-backend tasks in CUDA stream order (a GPU machine with SOFTDLA_BACKEND=cpu, or a loadable the
// CUDA backend could not prepare). Host functions may not call CUDA, so everything CUDA is enqueued up
// front: copies of device inputs into pinned staging, one host function that runs the tasks, copies of
// staged outputs back to device memory, a host function that marks the staging free, and a kernel
// that fails the stream if a task failed (as a DLA fault fails it on a Jetson).
#include <thread>

#include "log.h"
#include "standalone_gpu.h"
#include "standalone_queue.h"
#include "task.h"

namespace softdla::rt {

struct StagedTask {
  DeviceState* dev = nullptr;  // outlives the task: cudlaDestroyDevice waits for it (reap_staged)
  gpu::Platform* platform = nullptr;
  std::vector<ResolvedTask> tasks;
  bool take_lock = true;
  std::vector<void*> pinned;
  std::atomic<bool> finished{false};
  ~StagedTask() {
    for (void* p : pinned) platform->free_pinned(p);
  }
};

namespace {

void run_staged(void* data) {
  auto* st = static_cast<StagedTask*>(data);
  DeviceState& dev = *st->dev;
  std::unique_lock<std::mutex> exec(registry().cores[dev.core].exec_mutex, std::defer_lock);
  if (st->take_lock) exec.lock();
  run_tasks(dev, st->tasks);
  if (dev.last_error != cudlaSuccess) *dev.stream_fault_flag = 1;
}

void mark_finished(void* data) { static_cast<StagedTask*>(data)->finished = true; }

}  // namespace

void enqueue_cpu_tasks(DeviceState& dev, std::vector<ResolvedTask> tasks, void* stream, bool take_lock) {
  auto st = std::make_unique<StagedTask>();
  st->dev = &dev;
  st->platform = dev.platform;
  st->take_lock = take_lock;
  gpu::Platform& gpu = *dev.platform;
  {
    std::lock_guard<std::mutex> lock(dev.state_mutex);
    if (!dev.stream_fault_flag) {
      dev.stream_fault_flag = static_cast<uint32_t*>(gpu.alloc_pinned(sizeof(uint32_t)));
      *dev.stream_fault_flag = 0;
    }
  }
  struct CopyBack {
    void* device;
    const void* host;
    size_t bytes;
  };
  std::vector<CopyBack> copy_back;
  auto stage = [&](size_t bytes) {
    st->pinned.push_back(gpu.alloc_pinned(bytes));
    return st->pinned.back();
  };
  for (ResolvedTask& t : tasks) {
    const Model& m = t.module->engine.model();
    for (size_t i = 0; i < t.inputs.size(); ++i)
      if (t.input_on_device[i]) {
        void* h = stage(m.inputs[i].desc.size);
        gpu.copy_async(h, t.inputs[i], m.inputs[i].desc.size, stream);
        t.inputs[i] = h;
      }
    for (size_t i = 0; i < t.outputs.size(); ++i)
      if (t.output_on_device[i]) {
        void* h = stage(m.outputs[i].desc.size);
        copy_back.push_back({t.outputs[i], h, m.outputs[i].desc.size});
        t.outputs[i] = h;
      }
    if (t.statistics && t.statistics_on_device) {
      const size_t bytes = t.module->stats_descriptors[0].size;
      void* h = stage(bytes);
      copy_back.push_back({t.statistics, h, bytes});
      t.statistics = static_cast<uint8_t*>(h);
    }
  }
  st->tasks = std::move(tasks);
  gpu.host_call(stream, run_staged, st.get());
  for (const CopyBack& c : copy_back) gpu.copy_async(c.device, c.host, c.bytes, stream);
  gpu.host_call(stream, mark_finished, st.get());
  gpu.fail_stream(stream, dev.stream_fault_flag);
  std::lock_guard<std::mutex> lock(dev.state_mutex);
  dev.staged.push_back(std::move(st));
}

void reap_staged(DeviceState& dev, bool wait_all) {
  auto& list = dev.staged;
  // A failed CUDA context runs no queued host function: those tasks will never finish.
  if (wait_all && !list.empty() && !dev.platform->context_usable()) return list.clear();
  for (auto it = list.begin(); it != list.end();) {
    if (wait_all)
      while (!(*it)->finished) std::this_thread::sleep_for(std::chrono::microseconds(100));
    if ((*it)->finished) it = list.erase(it);
    else ++it;
  }
}

ModuleState::~ModuleState() = default;
DeviceState::DeviceState() = default;
DeviceState::~DeviceState() {
  if (stream_fault_flag) platform->free_pinned(stream_fault_flag);
  free_gpu_stage(*this);
}

}  // namespace softdla::rt
