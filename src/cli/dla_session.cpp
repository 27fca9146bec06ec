// DlaSession: the cuDLA hybrid-mode sequence of a user program (dla_session.h).
#include "dla_session.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include "cuda_driver.h"
#include "error.h"
#include "softdla/cudla_ext.h"
#include "softdla/cudla_status_name.h"

namespace softdla::cli {

const char* status_name(cudlaStatus s) { return softdlaStatusName(s); }

namespace {

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void check(cudlaStatus s, const char* call) {
  if (s != cudlaSuccess) fail(call, " returned ", status_name(s), " (libcudla.so.1's line above says why)");
}

// Host memory as cudlaMemRegister takes it: 32-byte aligned (64 here), zero-filled.
uint8_t* host_bytes(size_t n) {
  const size_t rounded = (n + 63) / 64 * 64;
  auto* p = static_cast<uint8_t*>(std::aligned_alloc(64, rounded ? rounded : 64));
  if (!p) fail("cannot allocate ", n, " bytes of host memory");
  std::memset(p, 0, rounded ? rounded : 64);
  return p;
}

}  // namespace

void DlaSession::HostBytes::operator()(uint8_t* p) const { std::free(p); }

DlaSession::DlaSession(const std::vector<uint8_t>& bytes, const Model& m, const SessionOptions& options)
    : model_(m), core_(options.dla_core) {
  std::string wanted = options.backend;
  if (wanted.empty()) {
    const char* env = std::getenv("SOFTDLA_BACKEND");
    wanted = env && *env ? env : "auto";
    if (wanted != "cpu" && wanted != "cuda" && wanted != "auto")
      fail("SOFTDLA_BACKEND='", wanted, "' is not cpu, cuda or auto (--backend overrides it)");
  }
  uint64_t cores = 0;
  check(cudlaDeviceGetCount(&cores), "cudlaDeviceGetCount");
  if (core_ >= cores)
    fail("--useDLACore ", core_, ": libcudla.so.1 has ", cores, " DLA core(s)",
         cores ? " (0 to " + std::to_string(cores - 1) + ")" : std::string(),
         "; softdla emulates SOFTDLA_NUM_DEVICES of them, 2 by default");
  try {
    // The runtime picks each handle's backend at cudlaCreateDevice from SOFTDLA_BACKEND (docs/RUNTIME.md);
    // the command names it explicitly so that it knows which memory the handle takes.
    std::string why_no_gpu;
    CudaDriver* cuda = wanted == "cpu" ? nullptr : CudaDriver::get(&why_no_gpu);
    if (wanted == "cuda" || (wanted == "auto" && cuda)) {
      const cudlaStatus s = create_device("cuda");
      if (s == cudlaErrorUnsupportedOperation && wanted == "cuda") {
        if (!cuda) fail("--backend cuda needs a GPU, and this machine has none the CUDA driver can use (", why_no_gpu,
                        "); use --backend cpu or auto to run on the CPU");
        fail("--backend cuda: the driver sees a GPU (", cuda->device_name(),
             ") but libcudla.so.1 has no CUDA backend for it (the line above, or SOFTDLA_LOG=info, says why: "
             "libsoftdla_cuda.so or cuBLASLt missing?); use --backend cpu to run on the CPU");
      }
      if (s == cudlaErrorUnsupportedOperation)
        std::cerr << "softdla: the CUDA backend is unavailable (see above); running on the CPU backend\n";
      else
        check(s, "cudlaCreateDevice");
    }
    if (!dev_) check(create_device("cpu"), "cudlaCreateDevice");
    if (backend_ == "cuda" && !cuda)
      fail("libcudla.so.1 runs on the CUDA backend, but the command cannot use the CUDA driver: ", why_no_gpu);
    device_ = backend_ == "cuda" ? cuda->device_name() : "CPU";
    load_module(bytes);
    if (options.statistics && !stats_size_)
      fail("libcudla.so.1 reports no layer-wise statistics for this module (CUDLA_NUM_OUTPUT_TASK_STATISTICS is 0)");
    if (!options.statistics) stats_size_ = 0;  // statistics off: the tasks take no statistics buffer
    allocate_and_register();
    if (backend_ == "cuda") {
      stream_ = cuda->create_stream();
      origin_event_ = cuda->create_event();
    }
  } catch (...) {
    release();
    throw;
  }
}

DlaSession::~DlaSession() { release(); }

cudlaStatus DlaSession::create_device(const std::string& backend) {
  setenv("SOFTDLA_BACKEND", backend.c_str(), 1);
  const cudlaStatus s = cudlaCreateDevice(core_, &dev_, CUDLA_CUDA_DLA);
  if (s != cudlaSuccess) dev_ = nullptr;
  else backend_ = backend;
  return s;
}

void DlaSession::load_module(const std::vector<uint8_t>& bytes) {
  check(cudlaModuleLoadFromMemory(dev_, bytes.data(), bytes.size(), &module_, CUDLA_MODULE_DEFAULT),
        "cudlaModuleLoadFromMemory");
  cudlaModuleAttribute a{};
  check(cudlaModuleGetAttributes(module_, CUDLA_NUM_INPUT_TENSORS, &a), "cudlaModuleGetAttributes");
  in_desc_.resize(a.numInputTensors);
  check(cudlaModuleGetAttributes(module_, CUDLA_NUM_OUTPUT_TENSORS, &a), "cudlaModuleGetAttributes");
  out_desc_.resize(a.numOutputTensors);
  if (in_desc_.size() != model_.inputs.size() || out_desc_.size() != model_.outputs.size())
    fail("libcudla.so.1 reports ", in_desc_.size(), " input(s) and ", out_desc_.size(), " output(s); the loadable has ",
         model_.inputs.size(), " and ", model_.outputs.size());
  a.inputTensorDesc = in_desc_.data();
  check(cudlaModuleGetAttributes(module_, CUDLA_INPUT_TENSOR_DESCRIPTORS, &a), "cudlaModuleGetAttributes");
  a.outputTensorDesc = out_desc_.data();
  check(cudlaModuleGetAttributes(module_, CUDLA_OUTPUT_TENSOR_DESCRIPTORS, &a), "cudlaModuleGetAttributes");
  // The command packs and unpacks with the loadable's own layouts: the runtime must describe the same
  // tensors (it does unless libcudla.so.1 is not softdla's, or another version of it).
  auto same = [](const cudlaModuleTensorDescriptor& d, const TensorDescriptor& t) {
    return d.size == t.size && d.n == t.n && d.c == t.c && d.h == t.h && d.w == t.w;
  };
  for (size_t i = 0; i < in_desc_.size(); ++i)
    if (!same(in_desc_[i], model_.inputs[i].desc))
      fail("libcudla.so.1 describes input ", i, " ('", in_desc_[i].name, "') unlike the loadable does");
  for (size_t i = 0; i < out_desc_.size(); ++i)
    if (!same(out_desc_[i], model_.outputs[i].desc))
      fail("libcudla.so.1 describes output ", i, " ('", out_desc_[i].name, "') unlike the loadable does");
  check(cudlaModuleGetAttributes(module_, CUDLA_NUM_OUTPUT_TASK_STATISTICS, &a), "cudlaModuleGetAttributes");
  if (a.numOutputTensors > 0) {
    std::vector<cudlaModuleTensorDescriptor> stats(a.numOutputTensors);
    a.outputTensorDesc = stats.data();
    check(cudlaModuleGetAttributes(module_, CUDLA_OUTPUT_TASK_STATISTICS_DESCRIPTORS, &a), "cudlaModuleGetAttributes");
    stats_size_ = stats[0].size;
  }
}

void DlaSession::allocate_and_register() {
  CudaDriver* cuda = backend_ == "cuda" ? CudaDriver::get(nullptr) : nullptr;
  // One buffer per tensor, registered once for every task of the session (as NVIDIA's samples do).
  auto add = [&](size_t bytes, uint32_t flags) -> uint8_t* {
    uint8_t* host = host_bytes(bytes);
    const void* ptr = host;
    if (cuda) {
      device_buffers_.push_back(cuda->alloc(bytes));
      ptr = reinterpret_cast<const void*>(uintptr_t(device_buffers_.back()));
    }
    uint64_t* dla = nullptr;
    const cudlaStatus s = cudlaMemRegister(dev_, static_cast<const uint64_t*>(ptr), bytes, &dla, flags);
    if (s != cudlaSuccess) {
      std::free(host);
      check(s, "cudlaMemRegister");
    }
    registered_.push_back(dla);
    return host;
  };
  for (const auto& d : in_desc_) in_host_.emplace_back(add(d.size, 0));
  for (const auto& d : out_desc_) out_host_.emplace_back(add(d.size, 0));
  if (stats_size_) stats_host_.reset(add(stats_size_, CUDLA_TASK_STATISTICS));
}

void DlaSession::release() {
  if (dev_) {
    for (uint64_t* p : registered_) cudlaMemUnregister(dev_, p);
    if (module_) cudlaModuleUnload(module_, 0);
    cudlaDestroyDevice(dev_);  // waits for tasks still in flight
  }
  registered_.clear();
  module_ = nullptr, dev_ = nullptr;
  if (CudaDriver* cuda = backend_ == "cuda" ? CudaDriver::get(nullptr) : nullptr) {
    for (uint64_t p : device_buffers_) cuda->free(p);
    cuda->destroy_event(origin_event_);
    cuda->destroy_stream(stream_);
  }
  device_buffers_.clear();
  origin_event_ = nullptr, stream_ = nullptr;
}

TaskTiming DlaSession::run(size_t batch) {
  CudaDriver* cuda = backend_ == "cuda" ? CudaDriver::get(nullptr) : nullptr;
  const size_t nin = in_desc_.size(), nout = out_desc_.size();
  std::vector<const uint64_t*> inputs(registered_.begin(), registered_.begin() + long(nin));
  std::vector<uint64_t*> outputs(registered_.begin() + long(nin), registered_.end());  // + statistics
  cudlaTask task{};
  task.moduleHandle = module_;
  task.numInputTensors = uint32_t(nin);
  task.inputTensor = inputs.data();
  task.numOutputTensors = uint32_t(outputs.size());
  task.outputTensor = outputs.data();

  TaskTiming t;
  t.batch = batch;
  void *start = nullptr, *end = nullptr;
  struct Events {  // freed however the task ends
    CudaDriver* cuda;
    void** e[2];
    ~Events() {
      if (cuda)
        for (void** p : e) cuda->destroy_event(*p);
    }
  } events{cuda, {&start, &end}};
  if (cuda) {
    for (size_t i = 0; i < nin; ++i) cuda->copy_to_device(device_buffers_[i], in_host_[i].get(), in_desc_[i].size, stream_);
    cuda->synchronize(stream_);  // the copies are not part of the task's time
    start = cuda->create_event();
    end = cuda->create_event();
  }
  const double t0 = now_ms();
  if (!started_) {
    origin_ = t0;
    if (cuda) cuda->record(origin_event_, stream_);
    started_ = true;
  }
  if (cuda) cuda->record(start, stream_);
  check(cudlaSubmitTask(dev_, &task, 1, stream_, 0), "cudlaSubmitTask");
  if (cuda) {
    cuda->record(end, stream_);
    cuda->synchronize(stream_);
  }
  const double t1 = now_ms();
  const uint64_t index = tasks_++;
  if (const cudlaStatus s = cudlaGetLastError(dev_); s != cudlaSuccess)
    fail("task ", index, " (batch ", batch, ") failed on DLA core ", core_, ": cudlaGetLastError returned ",
         status_name(s));
  t.start_ms = t0 - origin_;
  t.end_ms = t1 - origin_;
  if (cuda) {
    t.has_stream = true;
    t.stream_start_ms = cuda->elapsed_ms(origin_event_, start);
    t.stream_end_ms = cuda->elapsed_ms(origin_event_, end);
    for (size_t i = 0; i < nout; ++i)
      cuda->copy_to_host(out_host_[i].get(), device_buffers_[nin + i], out_desc_[i].size, stream_);
    if (stats_size_) cuda->copy_to_host(stats_host_.get(), device_buffers_[nin + nout], stats_size_, stream_);
    cuda->synchronize(stream_);
  }
  if (stats_size_) {
    softdlaStatsHeader h;
    std::memcpy(&h, stats_host_.get(), sizeof h);
    const size_t layers = model_.ops.size();
    if (stats_size_ < sizeof h || std::memcmp(h.magic, SOFTDLA_STATS_MAGIC, 8) != 0 ||
        h.version != SOFTDLA_STATS_VERSION || h.numLayers != layers ||
        stats_size_ < sizeof h + layers * sizeof(softdlaStatsRecord))
      fail("task ", index, ": the layer-wise statistics buffer is not in softdla's layout (include/softdla/cudla_ext.h)");
    t.has_statistics = true;
    t.task_ms = h.taskMs;
    for (size_t i = 0; i < layers; ++i) {
      softdlaStatsRecord r;
      std::memcpy(&r, stats_host_.get() + sizeof h + i * sizeof r, sizeof r);
      if (r.layerIndex >= layers) fail("task ", index, ": the statistics name layer ", r.layerIndex, " of ", layers);
      t.layers.push_back({r.layerIndex, r.startMs, r.endMs});
    }
  }
  return t;
}

}  // namespace softdla::cli
