// The cuDLA C API of libcudla.so.1: normal flows, layer-wise statistics, timeouts, and the error matrix
// (every function x every class of invalid argument returns the documented status, never crashes).
#include <dlfcn.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>

#include "cudla_fixture.h"
#include "sample_model.h"
#include "softdla/cudla_ext.h"

namespace softdla::testing {
namespace {

const cudlaDevHandle kForged = reinterpret_cast<cudlaDevHandle>(0x1234);
const cudlaModule kForgedModule = reinterpret_cast<cudlaModule>(0x5678);

TEST(CudlaApi, VersionAndCount) {
  uint64_t v = 0, n = 0;
  ASSERT_EQ(cudlaGetVersion(&v), cudlaSuccess);
  EXPECT_EQ(v, 13003000u);
  ASSERT_EQ(cudlaDeviceGetCount(&n), cudlaSuccess);
  EXPECT_EQ(n, 2u);
}

TEST(CudlaApi, RunsTasksInOrderAndComputes) {
  Ready r;
  for (int i = 0; i < 128; ++i) r.in.data[i] = uint8_t(int8_t(i - 64));
  cudlaTask& t = r.prepared();
  ASSERT_EQ(cudlaSubmitTask(r.dev, &t, 1, nullptr, 0), cudlaSuccess);
  EXPECT_EQ(cudlaGetLastError(r.dev), cudlaSuccess);
  for (int i = 0; i < 128; ++i) ASSERT_EQ(int8_t(r.out.data[i]), tiny_expected(int8_t(i - 64))) << i;
}

TEST(CudlaApi, TasksRunInArrayOrder) {
  // Task 0 writes B from A, task 1 writes C from B: C is correct only if 0 ran first.
  Ready r;
  AlignedBuffer c(128);
  uint64_t* c_dla = nullptr;
  ASSERT_EQ(cudlaMemRegister(r.dev, c.ptr(), 128, &c_dla, 0), cudlaSuccess);
  for (int i = 0; i < 128; ++i) r.in.data[i] = uint8_t(int8_t(i - 100));
  const uint64_t* in0[] = {r.in_dla};
  uint64_t* out0[] = {r.out_dla};
  const uint64_t* in1[] = {r.out_dla};
  uint64_t* out1[] = {c_dla};
  cudlaTask tasks[2] = {r.task, r.task};
  tasks[0].inputTensor = in0, tasks[0].outputTensor = out0;
  tasks[1].inputTensor = in1, tasks[1].outputTensor = out1;
  ASSERT_EQ(cudlaSubmitTask(r.dev, tasks, 2, nullptr, 0), cudlaSuccess);
  for (int i = 0; i < 128; ++i) ASSERT_EQ(int8_t(c.data[i]), tiny_expected(tiny_expected(int8_t(i - 100))));
}

TEST(CudlaApi, NoopValidatesButDoesNotRun) {
  Ready r;
  std::memset(r.out.data, 0x77, 128);
  ASSERT_EQ(cudlaSubmitTask(r.dev, &r.prepared(), 1, nullptr, CUDLA_SUBMIT_NOOP), cudlaSuccess);
  EXPECT_EQ(r.out.data[0], 0x77);
  cudlaTask bad = r.prepared();
  bad.numInputTensors = 2;
  EXPECT_EQ(cudlaSubmitTask(r.dev, &bad, 1, nullptr, CUDLA_SUBMIT_NOOP), cudlaErrorInvalidParam);
}

TEST(CudlaApi, DescriptorsMatchTheLoadable) {
  Ready r;
  cudlaModuleAttribute a;
  ASSERT_EQ(cudlaModuleGetAttributes(r.module, CUDLA_NUM_INPUT_TENSORS, &a), cudlaSuccess);
  EXPECT_EQ(a.numInputTensors, 1u);
  cudlaModuleTensorDescriptor d[1];
  a.inputTensorDesc = d;
  ASSERT_EQ(cudlaModuleGetAttributes(r.module, CUDLA_INPUT_TENSOR_DESCRIPTORS, &a), cudlaSuccess);
  EXPECT_STREQ(d[0].name, "x");
  EXPECT_EQ(d[0].size, 128u);
  EXPECT_EQ(d[0].c, 8u);
  EXPECT_EQ(d[0].dataType, CUDLA_DATA_TYPE_INT8);
  EXPECT_EQ(d[0].stride[1], 4u);
  ASSERT_EQ(cudlaModuleGetAttributes(r.module, CUDLA_NUM_OUTPUT_TASK_STATISTICS, &a), cudlaSuccess);
  EXPECT_EQ(a.numOutputTensors, 1u);
  a.outputTensorDesc = d;
  ASSERT_EQ(cudlaModuleGetAttributes(r.module, CUDLA_OUTPUT_TASK_STATISTICS_DESCRIPTORS, &a), cudlaSuccess);
  EXPECT_EQ(d[0].size, 32u + 24u);
}

TEST(CudlaApi, WholeTensorNameBySizeQuery) {
  Ready r;
  size_t need = 0;
  ASSERT_EQ(softdlaModuleGetTensorName(r.module, 0, 0, nullptr, &need), cudlaSuccess);
  EXPECT_EQ(need, 2u);  // "x" and its NUL
  char small[1];
  size_t given = sizeof(small);
  EXPECT_EQ(softdlaModuleGetTensorName(r.module, 0, 0, small, &given), cudlaErrorInvalidParam);
  EXPECT_EQ(given, 2u);
  char name[8];
  given = sizeof(name);
  ASSERT_EQ(softdlaModuleGetTensorName(r.module, 0, 0, name, &given), cudlaSuccess);
  EXPECT_STREQ(name, "x");
  EXPECT_EQ(softdlaModuleGetTensorName(r.module, 0, 1, name, &given), cudlaErrorInvalidParam);
  EXPECT_EQ(softdlaModuleGetTensorName(r.module, 0, 0, name, nullptr), cudlaErrorInvalidParam);
  EXPECT_EQ(softdlaModuleGetTensorName(kForgedModule, 0, 0, name, &given), cudlaErrorInvalidModule);
}

TEST(CudlaApi, LayerwiseStatisticsToCsv) {
  const auto bytes = write_loadable(make_sample_model());
  cudlaDevHandle dev;
  cudlaModule mod;
  ASSERT_EQ(cudlaCreateDevice(1, &dev, CUDLA_CUDA_DLA), cudlaSuccess);
  ASSERT_EQ(cudlaModuleLoadFromMemory(dev, bytes.data(), bytes.size(), &mod, 0), cudlaSuccess);
  cudlaModuleTensorDescriptor in_d, out_d[2], st_d;
  cudlaModuleAttribute a;
  a.inputTensorDesc = &in_d;
  ASSERT_EQ(cudlaModuleGetAttributes(mod, CUDLA_INPUT_TENSOR_DESCRIPTORS, &a), cudlaSuccess);
  a.outputTensorDesc = out_d;
  ASSERT_EQ(cudlaModuleGetAttributes(mod, CUDLA_OUTPUT_TENSOR_DESCRIPTORS, &a), cudlaSuccess);
  a.outputTensorDesc = &st_d;
  ASSERT_EQ(cudlaModuleGetAttributes(mod, CUDLA_OUTPUT_TASK_STATISTICS_DESCRIPTORS, &a), cudlaSuccess);
  AlignedBuffer in(in_d.size), o0(out_d[0].size), o1(out_d[1].size), st(st_d.size);
  std::memset(in.data, 3, in.size);
  uint64_t *in_p, *o0_p, *o1_p, *st_p;
  ASSERT_EQ(cudlaMemRegister(dev, in.ptr(), in.size, &in_p, 0), cudlaSuccess);
  ASSERT_EQ(cudlaMemRegister(dev, o0.ptr(), o0.size, &o0_p, 0), cudlaSuccess);
  ASSERT_EQ(cudlaMemRegister(dev, o1.ptr(), o1.size, &o1_p, 0), cudlaSuccess);
  // A statistics slot must be registered as such.
  const uint64_t* ins[] = {in_p};
  uint64_t* outs[] = {o0_p, o1_p, o1_p};
  cudlaTask t{mod, outs, 3, 1, ins, nullptr, nullptr};
  EXPECT_EQ(cudlaSubmitTask(dev, &t, 1, nullptr, 0), cudlaErrorInvalidAddress);
  ASSERT_EQ(cudlaMemRegister(dev, st.ptr(), st.size, &st_p, CUDLA_TASK_STATISTICS), cudlaSuccess);
  outs[2] = st_p;
  ASSERT_EQ(cudlaSubmitTask(dev, &t, 1, nullptr, 0), cudlaSuccess);
  ASSERT_EQ(cudlaGetLastError(dev), cudlaSuccess);
  const std::string csv = task_statistics_csv(mod, st.data, st.size);
  ASSERT_EQ(csv.rfind("layer_name,start_ms,end_ms\nconv1,", 0), 0u) << csv;
  EXPECT_NE(csv.find("\nsoftmax,"), std::string::npos);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 16);
  // Times are non-decreasing and each layer ends after it starts.
  softdlaStatsRecord prev{}, rec{};
  for (size_t i = 0; i < 15; ++i) {
    std::memcpy(&rec, st.data + 32 + 24 * i, 24);
    EXPECT_LE(rec.startMs, rec.endMs);
    EXPECT_LE(prev.endMs, rec.startMs + 1e-9);
    prev = rec;
  }
  size_t small = 4;
  char tiny[4];
  EXPECT_EQ(softdlaTranslateStatistics(mod, st.data, st.size, tiny, &small), cudlaErrorInvalidParam);
  EXPECT_EQ(small, csv.size() + 1);
  EXPECT_EQ(softdlaTranslateStatistics(mod, in.data, in.size, nullptr, &small), cudlaErrorInvalidParam);
  EXPECT_EQ(cudlaDestroyDevice(dev), cudlaSuccess);
}

// SOFTDLA_FAULT for one test: set on construction, cleared on destruction.
struct ScopedFault {
  explicit ScopedFault(const char* value) { setenv("SOFTDLA_FAULT", value, 1); }
  ~ScopedFault() { unsetenv("SOFTDLA_FAULT"); }
};

TEST(CudlaApi, InjectedFaultFailsTheChosenTaskOnly) {
  Ready r;
  for (int i = 0; i < 128; ++i) r.in.data[i] = uint8_t(int8_t(i - 64));
  ScopedFault fault("DataMismatch@1");
  cudlaTask& t = r.prepared();
  ASSERT_EQ(cudlaSubmitTask(r.dev, &t, 1, nullptr, 0), cudlaSuccess);  // task 0 runs
  EXPECT_EQ(cudlaGetLastError(r.dev), cudlaSuccess);
  std::memset(r.out.data, 0x55, 128);
  cudlaTask two[2] = {t, t};  // tasks 1 and 2: 1 faults, and the rest of its submission does not run
  ASSERT_EQ(cudlaSubmitTask(r.dev, two, 2, nullptr, 0), cudlaSuccess);  // the error is asynchronous
  EXPECT_EQ(cudlaGetLastError(r.dev), cudlaErrorDlaErrDataMismatch);
  for (int i = 0; i < 128; ++i) ASSERT_EQ(r.out.data[i], 0x55) << "a faulting task must leave its output alone";
  ASSERT_EQ(cudlaSubmitTask(r.dev, &t, 1, nullptr, 0), cudlaSuccess);  // task 3 (task 2 never ran)
  EXPECT_EQ(cudlaGetLastError(r.dev), cudlaSuccess);
  for (int i = 0; i < 128; ++i) ASSERT_EQ(int8_t(r.out.data[i]), tiny_expected(int8_t(i - 64))) << i;
}

TEST(CudlaApi, InjectedFaultByNumberAndMalformedValues) {
  Ready r;
  {
    ScopedFault fault("0x40000006");  // every task, by value: EngineTimeout
    ASSERT_EQ(cudlaSubmitTask(r.dev, &r.prepared(), 1, nullptr, 0), cudlaSuccess);
    EXPECT_EQ(cudlaGetLastError(r.dev), cudlaErrorDlaErrEngineTimeout);
  }
  for (const char* bad : {"Timeout", "0x40000009", "NoMem@", "NoMem@x", "NoMem@-1", "@3"}) {
    ScopedFault fault(bad);  // logged and ignored: the task runs
    ASSERT_EQ(cudlaSubmitTask(r.dev, &r.prepared(), 1, nullptr, 0), cudlaSuccess);
    EXPECT_EQ(cudlaGetLastError(r.dev), cudlaSuccess) << bad;
  }
}

TEST(CudlaApi, TimeoutIsReportedByGetLastError) {
  // A 256-channel 3x3 conv on 64x64 takes far more than 1 ms on a CPU.
  ModelBuilder b;
  const uint32_t x = b.input("x", {1, 256, 64, 64}, DataType::kInt8, 0.1f, TensorFormat::kLinear);
  const uint32_t y = b.tensor("y", {1, 256, 64, 64}, DataType::kInt8, 0.1f);
  ConvParams c;
  c.weights = b.constant(DataType::kInt8, {256, 256, 3, 3}, b.random_int8(256 * 256 * 9));
  c.pad_top = c.pad_left = c.pad_bottom = c.pad_right = 1;
  c.post.requant = {{1}, {20}};
  b.op("slow conv", {x}, y, c);
  b.output(y, TensorFormat::kLinear);
  const auto bytes = write_loadable(b.m);
  cudlaDevHandle dev;
  cudlaModule mod;
  ASSERT_EQ(cudlaCreateDevice(0, &dev, CUDLA_CUDA_DLA), cudlaSuccess);
  ASSERT_EQ(cudlaModuleLoadFromMemory(dev, bytes.data(), bytes.size(), &mod, 0), cudlaSuccess);
  AlignedBuffer in(256 * 64 * 64), out(256 * 64 * 64);
  uint64_t *in_p, *out_p;
  ASSERT_EQ(cudlaMemRegister(dev, in.ptr(), in.size, &in_p, 0), cudlaSuccess);
  ASSERT_EQ(cudlaMemRegister(dev, out.ptr(), out.size, &out_p, 0), cudlaSuccess);
  const uint64_t* ins[] = {in_p};
  uint64_t* outs[] = {out_p};
  cudlaTask t{mod, outs, 1, 1, ins, nullptr, nullptr};
  ASSERT_EQ(cudlaSetTaskTimeoutInMs(dev, 1), cudlaSuccess);
  ASSERT_EQ(cudlaSubmitTask(dev, &t, 1, nullptr, 0), cudlaSuccess);  // the error is asynchronous
  EXPECT_EQ(cudlaGetLastError(dev), cudlaErrorDlaErrEngineTimeout);
  ASSERT_EQ(cudlaSetTaskTimeoutInMs(dev, 1'000'000), cudlaSuccess);
  ASSERT_EQ(cudlaSubmitTask(dev, &t, 1, nullptr, 0), cudlaSuccess);
  EXPECT_EQ(cudlaGetLastError(dev), cudlaSuccess);  // the next task's status replaces it
  EXPECT_EQ(cudlaDestroyDevice(dev), cudlaSuccess);
}

TEST(CudlaApi, SixteenHandlesPerCore) {
  std::vector<cudlaDevHandle> handles(16);
  for (auto& h : handles) ASSERT_EQ(cudlaCreateDevice(1, &h, CUDLA_CUDA_DLA), cudlaSuccess);
  cudlaDevHandle extra = nullptr;
  EXPECT_EQ(cudlaCreateDevice(1, &extra, CUDLA_CUDA_DLA), cudlaErrorOutOfResources);
  EXPECT_EQ(extra, nullptr);
  EXPECT_EQ(cudlaCreateDevice(0, &extra, CUDLA_CUDA_DLA), cudlaSuccess);  // the other core has room
  EXPECT_EQ(cudlaDestroyDevice(extra), cudlaSuccess);
  EXPECT_EQ(cudlaDestroyDevice(handles[3]), cudlaSuccess);
  EXPECT_EQ(cudlaCreateDevice(1, &handles[3], CUDLA_CUDA_DLA), cudlaSuccess);  // a slot was freed
  for (auto h : handles) EXPECT_EQ(cudlaDestroyDevice(h), cudlaSuccess);
}

TEST(CudlaApi, DlaAddressIsNotTheHostPointer) {
  Ready r;
  EXPECT_NE(reinterpret_cast<const void*>(r.in_dla), static_cast<const void*>(r.in.data));
  cudlaTask t = r.prepared();
  const uint64_t* host_in[] = {r.in.ptr()};  // the classic mistake
  t.inputTensor = host_in;
  EXPECT_EQ(cudlaSubmitTask(r.dev, &t, 1, nullptr, 0), cudlaErrorInvalidAddress);
}

// ---------------------------------------------------------------- the error matrix
struct Case {
  const char* what;
  std::function<cudlaStatus(Ready&)> call;
  cudlaStatus expected;
};

// Whether this machine has a CUDA GPU. There, a made-up stream pointer reaches the CUDA driver, which
// may crash on it (as it would under NVIDIA's library): the case that passes one runs only without a GPU.
bool cuda_gpu_present() {
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!cuda) return false;
  auto init = reinterpret_cast<int (*)(unsigned)>(dlsym(cuda, "cuInit"));
  auto count = reinterpret_cast<int (*)(int*)>(dlsym(cuda, "cuDeviceGetCount"));
  int devices = 0;
  return init && count && init(0) == 0 && count(&devices) == 0 && devices > 0;  // kept loaded, as the runtime keeps it
}

TEST(CudlaErrorMatrix, EveryFunctionEveryInvalidArgument) {
  const auto loadable = tiny_loadable();
  AlignedBuffer other(256);
  uint8_t unaligned_storage[96];
  const uint64_t* unaligned = reinterpret_cast<const uint64_t*>(
      (reinterpret_cast<uintptr_t>(unaligned_storage) + 31) / 32 * 32 + 8);
  const std::vector<Case> cases = {
      {"GetVersion NULL", [](Ready&) { return cudlaGetVersion(nullptr); }, cudlaErrorInvalidParam},
      {"DeviceGetCount NULL", [](Ready&) { return cudlaDeviceGetCount(nullptr); }, cudlaErrorInvalidParam},
      {"CreateDevice NULL out", [](Ready&) { return cudlaCreateDevice(0, nullptr, 0); }, cudlaErrorInvalidParam},
      {"CreateDevice device 2",
       [](Ready&) { cudlaDevHandle h; return cudlaCreateDevice(2, &h, 0); }, cudlaErrorInvalidParam},
      {"CreateDevice flags 7",
       [](Ready&) { cudlaDevHandle h; return cudlaCreateDevice(0, &h, 7); }, cudlaErrorInvalidParam},
      {"DestroyDevice NULL", [](Ready&) { return cudlaDestroyDevice(nullptr); }, cudlaErrorInvalidDevice},
      {"DestroyDevice forged", [](Ready&) { return cudlaDestroyDevice(kForged); }, cudlaErrorInvalidDevice},
      {"DeviceGetAttribute forged",
       [](Ready&) { cudlaDevAttribute a; return cudlaDeviceGetAttribute(kForged, CUDLA_DEVICE_VERSION, &a); },
       cudlaErrorInvalidDevice},
      {"DeviceGetAttribute NULL out",
       [](Ready& r) { return cudlaDeviceGetAttribute(r.dev, CUDLA_DEVICE_VERSION, nullptr); }, cudlaErrorInvalidParam},
      {"DeviceGetAttribute bad attribute",
       [](Ready& r) { cudlaDevAttribute a; return cudlaDeviceGetAttribute(r.dev, cudlaDevAttributeType(9), &a); },
       cudlaErrorInvalidAttribute},
      {"MemRegister forged",
       [&](Ready&) { uint64_t* p; return cudlaMemRegister(kForged, other.ptr(), 256, &p, 0); }, cudlaErrorInvalidDevice},
      {"MemRegister NULL ptr",
       [](Ready& r) { uint64_t* p; return cudlaMemRegister(r.dev, nullptr, 256, &p, 0); }, cudlaErrorInvalidAddress},
      {"MemRegister size 0",
       [&](Ready& r) { uint64_t* p; return cudlaMemRegister(r.dev, other.ptr(), 0, &p, 0); }, cudlaErrorInvalidAddress},
      {"MemRegister NULL out",
       [&](Ready& r) { return cudlaMemRegister(r.dev, other.ptr(), 256, nullptr, 0); }, cudlaErrorInvalidParam},
      {"MemRegister bad flags",
       [&](Ready& r) { uint64_t* p; return cudlaMemRegister(r.dev, other.ptr(), 256, &p, 5); }, cudlaErrorInvalidParam},
      {"MemRegister unaligned",
       [&](Ready& r) { uint64_t* p; return cudlaMemRegister(r.dev, unaligned, 16, &p, 0); }, cudlaErrorInvalidAddress},
      {"MemRegister twice",
       [](Ready& r) { uint64_t* p; return cudlaMemRegister(r.dev, r.in.ptr(), 128, &p, 0); }, cudlaErrorMemoryRegistered},
      {"MemUnregister forged", [](Ready& r) { return cudlaMemUnregister(kForged, r.in_dla); }, cudlaErrorInvalidDevice},
      {"MemUnregister host pointer", [](Ready& r) { return cudlaMemUnregister(r.dev, r.in.ptr()); }, cudlaErrorInvalidAddress},
      {"MemUnregister NULL", [](Ready& r) { return cudlaMemUnregister(r.dev, nullptr); }, cudlaErrorInvalidAddress},
      {"MemUnregister twice",
       [](Ready& r) { cudlaMemUnregister(r.dev, r.in_dla); return cudlaMemUnregister(r.dev, r.in_dla); },
       cudlaErrorInvalidAddress},
      {"ModuleLoad forged",
       [&](Ready&) { cudlaModule m; return cudlaModuleLoadFromMemory(kForged, loadable.data(), loadable.size(), &m, 0); },
       cudlaErrorInvalidDevice},
      {"ModuleLoad NULL out",
       [&](Ready& r) { return cudlaModuleLoadFromMemory(r.dev, loadable.data(), loadable.size(), nullptr, 0); },
       cudlaErrorInvalidParam},
      {"ModuleLoad second module",
       [&](Ready& r) { cudlaModule m; return cudlaModuleLoadFromMemory(r.dev, loadable.data(), loadable.size(), &m, 0); },
       cudlaErrorUnsupportedOperation},
      {"ModuleLoad NULL bytes",
       [](Ready& r) { cudlaModuleUnload(r.module, 0); cudlaModule m; return cudlaModuleLoadFromMemory(r.dev, nullptr, 10, &m, 0); },
       cudlaErrorInvalidParam},
      {"ModuleLoad garbage",
       [&](Ready& r) {
         cudlaModuleUnload(r.module, 0);
         std::vector<uint8_t> junk(loadable.size(), 0xab);
         cudlaModule m;
         return cudlaModuleLoadFromMemory(r.dev, junk.data(), junk.size(), &m, 0);
       },
       cudlaErrorInvalidModule},
      {"ModuleLoad truncated",
       [&](Ready& r) {
         cudlaModuleUnload(r.module, 0);
         cudlaModule m;
         return cudlaModuleLoadFromMemory(r.dev, loadable.data(), loadable.size() / 2, &m, 0);
       },
       cudlaErrorInvalidModule},
      {"ModuleLoad bad flags",
       [&](Ready& r) { cudlaModule m; return cudlaModuleLoadFromMemory(r.dev, loadable.data(), loadable.size(), &m, 8); },
       cudlaErrorInvalidParam},
      {"ModuleLoad fault diagnostics",
       [](Ready& r) { cudlaModule m; return cudlaModuleLoadFromMemory(r.dev, nullptr, 0, &m, 1); },
       cudlaErrorUnsupportedOperation},
      {"ModuleGetAttributes forged",
       [](Ready&) { cudlaModuleAttribute a; return cudlaModuleGetAttributes(kForgedModule, CUDLA_NUM_INPUT_TENSORS, &a); },
       cudlaErrorInvalidModule},
      {"ModuleGetAttributes NULL out",
       [](Ready& r) { return cudlaModuleGetAttributes(r.module, CUDLA_NUM_INPUT_TENSORS, nullptr); }, cudlaErrorInvalidParam},
      {"ModuleGetAttributes bad type",
       [](Ready& r) { cudlaModuleAttribute a; return cudlaModuleGetAttributes(r.module, cudlaModuleAttributeType(6), &a); },
       cudlaErrorInvalidAttribute},
      {"ModuleGetAttributes NULL descriptor array",
       [](Ready& r) {
         cudlaModuleAttribute a;
         a.inputTensorDesc = nullptr;
         return cudlaModuleGetAttributes(r.module, CUDLA_INPUT_TENSOR_DESCRIPTORS, &a);
       },
       cudlaErrorInvalidParam},
      {"ModuleGetAttributes after unload",
       [](Ready& r) { cudlaModuleUnload(r.module, 0); cudlaModuleAttribute a;
                      return cudlaModuleGetAttributes(r.module, CUDLA_NUM_INPUT_TENSORS, &a); },
       cudlaErrorInvalidModule},
      {"ModuleUnload forged", [](Ready&) { return cudlaModuleUnload(kForgedModule, 0); }, cudlaErrorInvalidModule},
      {"ModuleUnload bad flags", [](Ready& r) { return cudlaModuleUnload(r.module, 1); }, cudlaErrorInvalidParam},
      {"ModuleUnload twice",
       [](Ready& r) { cudlaModuleUnload(r.module, 0); return cudlaModuleUnload(r.module, 0); }, cudlaErrorInvalidModule},
      {"SubmitTask forged", [](Ready& r) { return cudlaSubmitTask(kForged, &r.prepared(), 1, nullptr, 0); },
       cudlaErrorInvalidDevice},
      {"SubmitTask NULL tasks", [](Ready& r) { return cudlaSubmitTask(r.dev, nullptr, 1, nullptr, 0); },
       cudlaErrorInvalidParam},
      {"SubmitTask zero tasks", [](Ready& r) { return cudlaSubmitTask(r.dev, &r.prepared(), 0, nullptr, 0); },
       cudlaErrorInvalidParam},
      {"SubmitTask bad flags", [](Ready& r) { return cudlaSubmitTask(r.dev, &r.prepared(), 1, nullptr, 64); },
       cudlaErrorInvalidParam},
      {"SubmitTask diagnostics flag",
       [](Ready& r) { return cudlaSubmitTask(r.dev, &r.prepared(), 1, nullptr, CUDLA_SUBMIT_DIAGNOSTICS_TASK); },
       cudlaErrorUnsupportedOperation},
      {"SubmitTask stream without CUDA",
       [](Ready& r) { return cudlaSubmitTask(r.dev, &r.prepared(), 1, reinterpret_cast<void*>(0x10), 0); },
       cudlaErrorUnsupportedOperation},
      {"SubmitTask wrong module",
       [](Ready& r) { cudlaTask t = r.prepared(); t.moduleHandle = kForgedModule;
                      return cudlaSubmitTask(r.dev, &t, 1, nullptr, 0); },
       cudlaErrorInvalidModule},
      {"SubmitTask after unload",
       [](Ready& r) { cudlaModuleUnload(r.module, 0); return cudlaSubmitTask(r.dev, &r.prepared(), 1, nullptr, 0); },
       cudlaErrorInvalidModule},
      {"SubmitTask NULL input list",
       [](Ready& r) { cudlaTask t = r.prepared(); t.inputTensor = nullptr; return cudlaSubmitTask(r.dev, &t, 1, nullptr, 0); },
       cudlaErrorUnsupportedOperation},
      {"SubmitTask wrong input count",
       [](Ready& r) { cudlaTask t = r.prepared(); t.numInputTensors = 0; return cudlaSubmitTask(r.dev, &t, 1, nullptr, 0); },
       cudlaErrorInvalidParam},
      {"SubmitTask wrong output count",
       [](Ready& r) { cudlaTask t = r.prepared(); t.numOutputTensors = 3; return cudlaSubmitTask(r.dev, &t, 1, nullptr, 0); },
       cudlaErrorInvalidParam},
      {"SubmitTask unregistered input",
       [&](Ready& r) { cudlaTask t = r.prepared(); const uint64_t* in[] = {other.ptr()}; t.inputTensor = in;
                       return cudlaSubmitTask(r.dev, &t, 1, nullptr, 0); },
       cudlaErrorInvalidAddress},
      {"SubmitTask NULL input pointer",
       [&](Ready& r) { cudlaTask t = r.prepared(); const uint64_t* in[] = {nullptr}; t.inputTensor = in;
                       return cudlaSubmitTask(r.dev, &t, 1, nullptr, 0); },
       cudlaErrorInvalidAddress},
      {"SubmitTask buffer too small",
       [&](Ready& r) {
         uint64_t* small = nullptr;
         cudlaMemRegister(r.dev, other.ptr(), 64, &small, 0);
         cudlaTask t = r.prepared();
         uint64_t* out[] = {small};
         t.outputTensor = out;
         return cudlaSubmitTask(r.dev, &t, 1, nullptr, 0);
       },
       cudlaErrorInvalidAddress},
      {"SubmitTask unregistered after register",
       [](Ready& r) { cudlaMemUnregister(r.dev, r.out_dla); return cudlaSubmitTask(r.dev, &r.prepared(), 1, nullptr, 0); },
       cudlaErrorInvalidAddress},
      {"SubmitTask wait events in hybrid",
       [](Ready& r) { cudlaTask t = r.prepared(); cudlaWaitEvents w{nullptr, 0}; t.waitEvents = &w;
                      return cudlaSubmitTask(r.dev, &t, 1, nullptr, 0); },
       cudlaErrorUnsupportedOperation},
      {"SubmitTask second task bad (nothing runs)",
       [](Ready& r) { cudlaTask t[2] = {r.prepared(), r.prepared()}; t[1].numInputTensors = 5;
                      std::memset(r.out.data, 0x55, 128);
                      const cudlaStatus s = cudlaSubmitTask(r.dev, t, 2, nullptr, 0);
                      return r.out.data[0] == 0x55 ? s : cudlaErrorUnknown; },
       cudlaErrorInvalidParam},
      {"GetLastError forged", [](Ready&) { return cudlaGetLastError(kForged); }, cudlaErrorInvalidDevice},
      {"SetTaskTimeout forged", [](Ready&) { return cudlaSetTaskTimeoutInMs(kForged, 10); }, cudlaErrorInvalidParam},
      {"SetTaskTimeout 0", [](Ready& r) { return cudlaSetTaskTimeoutInMs(r.dev, 0); }, cudlaErrorInvalidParam},
      {"SetTaskTimeout above 1000 s", [](Ready& r) { return cudlaSetTaskTimeoutInMs(r.dev, 1'000'001); },
       cudlaErrorInvalidParam},
      {"SetTaskTimeout 1000 s", [](Ready& r) { return cudlaSetTaskTimeoutInMs(r.dev, 1'000'000); }, cudlaSuccess},
      {"ImportExternalMemory forged",
       [](Ready&) { cudlaExternalMemoryHandleDesc d{&d, 64}; uint64_t* p; return cudlaImportExternalMemory(kForged, &d, &p, 0); },
       cudlaErrorInvalidDevice},
      {"ImportExternalMemory NULL desc",
       [](Ready& r) { uint64_t* p; return cudlaImportExternalMemory(r.dev, nullptr, &p, 0); }, cudlaErrorInvalidParam},
      {"ImportExternalMemory on a hybrid handle",
       [](Ready& r) { cudlaExternalMemoryHandleDesc d{&d, 64}; uint64_t* p; return cudlaImportExternalMemory(r.dev, &d, &p, 0); },
       cudlaErrorUnsupportedOperation},
      {"GetNvSciSyncAttributes NULL", [](Ready&) { return cudlaGetNvSciSyncAttributes(nullptr, 1); }, cudlaErrorInvalidParam},
      {"GetNvSciSyncAttributes bad flags",
       [](Ready&) { uint64_t l = 0; return cudlaGetNvSciSyncAttributes(&l, 4); }, cudlaErrorInvalidParam},
      {"GetNvSciSyncAttributes not an NvSciSyncAttrList",
       [](Ready&) { uint64_t l = 0; return cudlaGetNvSciSyncAttributes(&l, 3); }, cudlaErrorNvSci},
      {"ImportExternalSemaphore forged",
       [](Ready&) { cudlaExternalSemaphoreHandleDesc d{&d}; uint64_t* p; return cudlaImportExternalSemaphore(kForged, &d, &p, 0); },
       cudlaErrorInvalidDevice},
      {"ImportExternalSemaphore bad flags",
       [](Ready& r) { cudlaExternalSemaphoreHandleDesc d{&d}; uint64_t* p; return cudlaImportExternalSemaphore(r.dev, &d, &p, 1); },
       cudlaErrorInvalidParam},
      {"ImportExternalSemaphore on a hybrid handle",
       [](Ready& r) { cudlaExternalSemaphoreHandleDesc d{&d}; uint64_t* p; return cudlaImportExternalSemaphore(r.dev, &d, &p, 0); },
       cudlaErrorUnsupportedOperation},
  };
  const bool gpu = cuda_gpu_present();
  for (const Case& c : cases) {
    if (gpu && std::string(c.what) == "SubmitTask stream without CUDA") continue;
    Ready r;
    EXPECT_EQ(c.call(r), c.expected) << c.what;
    // The handle stays usable after every recoverable error (unless the case removed what it needs).
    EXPECT_NE(cudlaGetLastError(r.dev), cudlaErrorInvalidDevice) << c.what;
  }
}

TEST(CudlaErrorMatrix, DestroyedHandleStaysInvalid) {
  cudlaDevHandle dev;
  ASSERT_EQ(cudlaCreateDevice(0, &dev, CUDLA_CUDA_DLA), cudlaSuccess);
  const auto bytes = tiny_loadable();
  cudlaModule mod;
  ASSERT_EQ(cudlaModuleLoadFromMemory(dev, bytes.data(), bytes.size(), &mod, 0), cudlaSuccess);
  ASSERT_EQ(cudlaDestroyDevice(dev), cudlaSuccess);
  cudlaDevHandle fresh;
  ASSERT_EQ(cudlaCreateDevice(0, &fresh, CUDLA_CUDA_DLA), cudlaSuccess);
  EXPECT_NE(fresh, dev);  // handles never repeat
  AlignedBuffer buf(64);
  uint64_t* p;
  cudlaDevAttribute a;
  cudlaModuleAttribute ma;
  EXPECT_EQ(cudlaDestroyDevice(dev), cudlaErrorInvalidDevice);
  EXPECT_EQ(cudlaMemRegister(dev, buf.ptr(), 64, &p, 0), cudlaErrorInvalidDevice);
  EXPECT_EQ(cudlaDeviceGetAttribute(dev, CUDLA_DEVICE_VERSION, &a), cudlaErrorInvalidDevice);
  EXPECT_EQ(cudlaGetLastError(dev), cudlaErrorInvalidDevice);
  // cudla-api.md: a module "not loaded in any device" gives InvalidDevice; destroying its device unloaded it.
  EXPECT_EQ(cudlaModuleGetAttributes(mod, CUDLA_NUM_INPUT_TENSORS, &ma), cudlaErrorInvalidDevice);
  EXPECT_EQ(cudlaModuleUnload(mod, 0), cudlaErrorInvalidDevice);
  // A module unloaded by cudlaModuleUnload is no module at all any more.
  cudlaModule again;
  ASSERT_EQ(cudlaModuleLoadFromMemory(fresh, bytes.data(), bytes.size(), &again, 0), cudlaSuccess);
  ASSERT_EQ(cudlaModuleUnload(again, 0), cudlaSuccess);
  EXPECT_EQ(cudlaModuleUnload(again, 0), cudlaErrorInvalidModule);
  EXPECT_EQ(cudlaModuleGetAttributes(again, CUDLA_NUM_INPUT_TENSORS, &ma), cudlaErrorInvalidModule);
  EXPECT_EQ(cudlaDestroyDevice(fresh), cudlaSuccess);
}

TEST(CudlaApi, StandaloneHandles) {
  cudlaDevHandle dev;
  ASSERT_EQ(cudlaCreateDevice(0, &dev, CUDLA_STANDALONE), cudlaSuccess);
  const auto bytes = tiny_loadable();
  cudlaModule mod;
  ASSERT_EQ(cudlaModuleLoadFromMemory(dev, bytes.data(), bytes.size(), &mod, 0), cudlaSuccess);
  AlignedBuffer buf(128);
  uint64_t* p;
  EXPECT_EQ(cudlaMemRegister(dev, buf.ptr(), 128, &p, 0), cudlaErrorUnsupportedOperation);
  cudlaTask t{};
  t.moduleHandle = mod;
  EXPECT_EQ(cudlaSubmitTask(dev, &t, 1, reinterpret_cast<void*>(1), 0), cudlaErrorInvalidParam);
  EXPECT_EQ(cudlaDestroyDevice(dev), cudlaSuccess);
}

TEST(CudlaApi, DeviceAttributes) {
  Ready r;
  cudlaDevAttribute a;
  ASSERT_EQ(cudlaDeviceGetAttribute(r.dev, CUDLA_DEVICE_VERSION, &a), cudlaSuccess);
  EXPECT_EQ(a.deviceVersion, 2u);
  ASSERT_EQ(cudlaDeviceGetAttribute(r.dev, CUDLA_UNIFIED_ADDRESSING, &a), cudlaSuccess);
  EXPECT_EQ(a.unifiedAddressingSupported, 0);
}

}  // namespace
}  // namespace softdla::testing
