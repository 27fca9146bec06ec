// One loadable on one DLA core, driven through libcudla.so.1 the way a cuDLA user program drives it
// (hybrid mode: cudlaCreateDevice, cudlaModuleLoadFromMemory, cudlaModuleGetAttributes, cudlaMemRegister,
// cudlaSubmitTask, cudlaGetLastError), so `softdla run` and `softdla profile` show what such a program
// gets. The command never builds an engine itself (docs/DESIGN.md: tools go through the runtime).
//
// Memory and submission follow the backend the runtime chose for the handle (docs/RUNTIME.md):
//  - CPU backend: 32-byte-aligned host buffers, stream NULL, so cudlaSubmitTask returns with the task done;
//  - CUDA backend: device buffers (cuMemAlloc through cuda_driver.h) and a CUDA stream the task is enqueued
//    on; the inputs are copied in before the submission and the outputs out after it, and CUDA events
//    time the task on the stream.
// With statistics on, each task also writes the layer-wise statistics buffer (the descriptor of
// CUDLA_OUTPUT_TASK_STATISTICS_DESCRIPTORS, registered with CUDLA_TASK_STATISTICS and passed after the
// outputs), read back here in the layout of include/softdla/cudla_ext.h.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cudla.h"
#include "model.h"

namespace softdla::cli {

struct LayerTime {
  uint32_t layer = 0;  // op index in the loadable (execution order)
  double start_ms = 0, end_ms = 0;  // from the start of the task, as the statistics record holds them
};

// One submitted task. Host times are steady-clock ms from the session's origin, the start of its first
// submission.
struct TaskTiming {
  size_t batch = 0;
  double start_ms = 0, end_ms = 0;  // cudlaSubmitTask called .. the task complete (stream synchronized)
  bool has_statistics = false;
  double task_ms = 0;               // the statistics header's whole-task time
  std::vector<LayerTime> layers;    // one per op, in execution order
  bool has_stream = false;          // CUDA backend: the task on the stream, from CUDA events recorded
  double stream_start_ms = 0, stream_end_ms = 0;  // before and after it (ms from the first task's start event)
};

struct SessionOptions {
  std::string backend;    // cpu | cuda | auto; empty: SOFTDLA_BACKEND, else auto
  uint64_t dla_core = 0;  // the device index given to cudlaCreateDevice
  bool statistics = false;
};

class DlaSession {
 public:
  // `bytes` is the loadable, `m` what read_loadable made of it (names, shapes and formats for the caller).
  DlaSession(const std::vector<uint8_t>& bytes, const Model& m, const SessionOptions& options);
  ~DlaSession();
  DlaSession(const DlaSession&) = delete;
  DlaSession& operator=(const DlaSession&) = delete;

  const std::string& backend() const { return backend_; }  // cpu | cuda: what the runtime runs the tasks on
  const std::string& device() const { return device_; }    // for humans: "CPU" or the GPU's name
  uint64_t dla_core() const { return core_; }
  // Host bytes of I/O tensor i in its bound format, descriptor size (cudlaModuleTensorDescriptor::size):
  // the caller packs inputs here before run() and reads outputs after it.
  uint8_t* input(size_t i) { return in_host_[i].get(); }
  const uint8_t* output(size_t i) const { return out_host_[i].get(); }

  // Submits one task over the current inputs and waits for it; fails on any error of the task.
  TaskTiming run(size_t batch);

 private:
  cudlaStatus create_device(const std::string& backend);
  void load_module(const std::vector<uint8_t>& bytes);
  void allocate_and_register();
  void release();

  const Model& model_;
  std::string backend_, device_;
  uint64_t core_ = 0;
  cudlaDevHandle dev_ = nullptr;
  cudlaModule module_ = nullptr;
  std::vector<cudlaModuleTensorDescriptor> in_desc_, out_desc_;
  size_t stats_size_ = 0;  // 0: no statistics
  struct HostBytes {
    void operator()(uint8_t* p) const;
  };
  std::vector<std::unique_ptr<uint8_t[], HostBytes>> in_host_, out_host_;
  std::unique_ptr<uint8_t[], HostBytes> stats_host_;
  std::vector<uint64_t> device_buffers_;      // CUDA backend: cuMemAlloc'd I/O and statistics buffers
  std::vector<uint64_t*> registered_;         // DLA addresses, in I/O order then statistics
  void* stream_ = nullptr;                    // CUDA backend
  void* origin_event_ = nullptr;              // CUDA backend: recorded before the first task
  bool started_ = false;
  double origin_ = 0;                         // steady clock, ms
  uint64_t tasks_ = 0;
};

// The name of a cudlaStatus ("cudlaErrorInvalidAddress"), for messages.
const char* status_name(cudlaStatus s);

}  // namespace softdla::cli
