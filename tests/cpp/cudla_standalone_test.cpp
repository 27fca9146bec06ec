// Standalone mode: NvSciBuf memory imported, NvSciSync semaphores imported, tasks submitted with
// pre-fences and SOF/EOF fences, asynchronous completion, the task timeout ending a wait on a fence that
// never signals, and teardown with work still queued (docs/RUNTIME.md, "Standalone mode").
#include <cstdlib>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "cudla.h"
#include "cudla_fixture.h"
#include "nvscibuf.h"
#include "nvscisync.h"

namespace softdla::testing {
namespace {

// A task of tiny_loadable's one input and one output, no events.
cudlaTask one_in_one_out(cudlaModule module, const uint64_t** inputs, uint64_t** outputs) {
  cudlaTask t{};
  t.moduleHandle = module;
  t.inputTensor = inputs;
  t.numInputTensors = 1;
  t.outputTensor = outputs;
  t.numOutputTensors = 1;
  return t;
}

// NVIDIA's cuDLAStandaloneMode flow around tiny_loadable: NvSciBuf tensors for the input and output,
// a CPU-signalled object the task waits on and a cuDLA-signalled one the CPU waits on.
struct Standalone {
  cudlaDevHandle dev = nullptr;
  cudlaModule module = nullptr;
  NvSciBufModule buf_module = nullptr;
  NvSciBufAttrList buf_lists[2] = {}, reconciled[2] = {};
  NvSciBufObj bufs[2] = {};
  void* cpu[2] = {};
  uint64_t* dla[2] = {};
  NvSciSyncModule sync_module = nullptr;
  NvSciSyncCpuWaitContext ctx = nullptr;
  std::vector<NvSciSyncAttrList> sync_lists;
  NvSciSyncObj pre_obj = nullptr, eof_obj = nullptr;  // CPU signals pre_obj; the DLA signals eof_obj
  uint64_t* pre_sem = nullptr;
  uint64_t* eof_sem = nullptr;
  size_t bytes = 0;

  Standalone() {
    const auto loadable = tiny_loadable();
    EXPECT_EQ(cudlaCreateDevice(0, &dev, CUDLA_STANDALONE), cudlaSuccess);
    EXPECT_EQ(cudlaModuleLoadFromMemory(dev, loadable.data(), loadable.size(), &module, 0), cudlaSuccess);
    bytes = 8 * 4 * 4;
    EXPECT_EQ(NvSciBufModuleOpen(&buf_module), NvSciError_Success);
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(NvSciBufAttrListCreate(buf_module, &buf_lists[i]), NvSciError_Success);
      NvSciBufType t = NvSciBufType_Tensor;
      NvSciBufAttrValDataType dt = NvSciDataType_Int8;
      NvSciBufAttrValAccessPerm perm = NvSciBufAccessPerm_ReadWrite;
      uint32_t dims = 1;
      uint64_t sizes[] = {bytes};
      bool need_cpu = true;
      NvSciBufAttrKeyValuePair kv[] = {{NvSciBufGeneralAttrKey_Types, &t, sizeof(t)},
                                       {NvSciBufTensorAttrKey_DataType, &dt, sizeof(dt)},
                                       {NvSciBufTensorAttrKey_NumDims, &dims, sizeof(dims)},
                                       {NvSciBufTensorAttrKey_SizePerDim, sizes, sizeof(sizes)},
                                       {NvSciBufGeneralAttrKey_RequiredPerm, &perm, sizeof(perm)},
                                       {NvSciBufGeneralAttrKey_NeedCpuAccess, &need_cpu, sizeof(need_cpu)}};
      EXPECT_EQ(NvSciBufAttrListSetAttrs(buf_lists[i], kv, 6), NvSciError_Success);
      NvSciBufAttrList conflict = nullptr;
      EXPECT_EQ(NvSciBufAttrListReconcile(&buf_lists[i], 1, &reconciled[i], &conflict), NvSciError_Success);
      EXPECT_EQ(NvSciBufObjAlloc(reconciled[i], &bufs[i]), NvSciError_Success);
      EXPECT_EQ(NvSciBufObjGetCpuPtr(bufs[i], &cpu[i]), NvSciError_Success);
      cudlaExternalMemoryHandleDesc d{bufs[i], bytes};
      EXPECT_EQ(cudlaImportExternalMemory(dev, &d, &dla[i], 0), cudlaSuccess);
    }
    EXPECT_EQ(NvSciSyncModuleOpen(&sync_module), NvSciError_Success);
    EXPECT_EQ(NvSciSyncCpuWaitContextAlloc(sync_module, &ctx), NvSciError_Success);
    pre_obj = sync_object(CUDLA_NVSCISYNC_ATTR_WAIT, NvSciSyncAccessPerm_SignalOnly);
    eof_obj = sync_object(CUDLA_NVSCISYNC_ATTR_SIGNAL, NvSciSyncAccessPerm_WaitOnly);
    cudlaExternalSemaphoreHandleDesc s1{pre_obj}, s2{eof_obj};
    EXPECT_EQ(cudlaImportExternalSemaphore(dev, &s1, &pre_sem, 0), cudlaSuccess);
    EXPECT_EQ(cudlaImportExternalSemaphore(dev, &s2, &eof_sem, 0), cudlaSuccess);
  }
  NvSciSyncObj sync_object(uint32_t cudla_flags, NvSciSyncAccessPerm cpu_perm) {
    NvSciSyncAttrList lists[2] = {};
    EXPECT_EQ(NvSciSyncAttrListCreate(sync_module, &lists[0]), NvSciError_Success);
    EXPECT_EQ(NvSciSyncAttrListCreate(sync_module, &lists[1]), NvSciError_Success);
    EXPECT_EQ(cudlaGetNvSciSyncAttributes(reinterpret_cast<uint64_t*>(lists[0]), cudla_flags), cudlaSuccess);
    bool need_cpu = true;
    NvSciSyncAttrKeyValuePair kv[] = {{NvSciSyncAttrKey_NeedCpuAccess, &need_cpu, sizeof(need_cpu)},
                                      {NvSciSyncAttrKey_RequiredPerm, &cpu_perm, sizeof(cpu_perm)}};
    EXPECT_EQ(NvSciSyncAttrListSetAttrs(lists[1], kv, 2), NvSciError_Success);
    NvSciSyncAttrList reconciled = nullptr, conflict = nullptr;
    EXPECT_EQ(NvSciSyncAttrListReconcile(lists, 2, &reconciled, &conflict), NvSciError_Success);
    NvSciSyncObj obj = nullptr;
    EXPECT_EQ(NvSciSyncObjAlloc(reconciled, &obj), NvSciError_Success);
    sync_lists.insert(sync_lists.end(), {lists[0], lists[1], reconciled});
    return obj;
  }
  ~Standalone() {
    if (dev) cudlaDestroyDevice(dev);
    NvSciSyncObjFree(pre_obj);
    NvSciSyncObjFree(eof_obj);
    for (auto l : sync_lists) NvSciSyncAttrListFree(l);
    NvSciSyncCpuWaitContextFree(ctx);
    NvSciSyncModuleClose(sync_module);
    for (int i = 0; i < 2; ++i) {
      NvSciBufObjFree(bufs[i]);
      NvSciBufAttrListFree(reconciled[i]);
      NvSciBufAttrListFree(buf_lists[i]);
    }
    NvSciBufModuleClose(buf_module);
  }

  // Submits one task waiting on `pre` (if given) and signalling an EOF fence into `eof`.
  cudlaStatus submit(NvSciSyncFence* pre, NvSciSyncFence* eof, uint32_t flags = 0) {
    const uint64_t* inputs[] = {dla[0]};
    uint64_t* outputs[] = {dla[1]};
    CudlaFence pre_fence{pre, CUDLA_NVSCISYNC_FENCE};
    cudlaWaitEvents wait{&pre_fence, 1};
    uint64_t* sems[] = {eof_sem};
    CudlaFence eof_fence{eof, CUDLA_NVSCISYNC_FENCE};
    cudlaSignalEvents signal{sems, &eof_fence, 1};
    cudlaTask t = one_in_one_out(module, inputs, outputs);
    t.waitEvents = pre ? &wait : nullptr;
    t.signalEvents = &signal;
    return cudlaSubmitTask(dev, &t, 1, nullptr, flags);
  }
  void fill_input(int8_t base) {
    for (size_t i = 0; i < bytes; ++i) static_cast<int8_t*>(cpu[0])[i] = int8_t(base + int(i % 50));
  }
  bool output_matches(int8_t base) const {
    for (size_t i = 0; i < bytes; ++i)
      if (static_cast<const int8_t*>(cpu[1])[i] != tiny_expected(int8_t(base + int(i % 50)))) return false;
    return true;
  }
};

TEST(CudlaStandalone, TaskWaitsForItsPreFenceThenSignalsItsEofFence) {
  Standalone s;
  s.fill_input(-20);
  NvSciSyncFence pre = NvSciSyncFenceInitializer, eof = NvSciSyncFenceInitializer;
  ASSERT_EQ(NvSciSyncObjGenerateFence(s.pre_obj, &pre), NvSciError_Success);
  ASSERT_EQ(s.submit(&pre, &eof), cudlaSuccess);  // returns at once: the pre-fence is not signalled yet
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(NvSciSyncFenceWait(&eof, s.ctx, 0), NvSciError_Timeout);  // still waiting for the pre-fence
  ASSERT_EQ(NvSciSyncObjSignal(s.pre_obj), NvSciError_Success);
  ASSERT_EQ(NvSciSyncFenceWait(&eof, s.ctx, 10'000'000), NvSciError_Success);
  EXPECT_TRUE(s.output_matches(-20));
  EXPECT_EQ(cudlaGetLastError(s.dev), cudlaSuccess);
  NvSciSyncFenceClear(&pre);
  NvSciSyncFenceClear(&eof);
}

TEST(CudlaStandalone, TasksCompleteInSubmissionOrder) {
  Standalone s;
  s.fill_input(3);
  std::vector<NvSciSyncFence> eofs(8, NvSciSyncFence NvSciSyncFenceInitializer);
  for (auto& f : eofs) ASSERT_EQ(s.submit(nullptr, &f), cudlaSuccess);
  ASSERT_EQ(NvSciSyncFenceWait(&eofs.back(), s.ctx, 10'000'000), NvSciError_Success);
  for (auto& f : eofs) EXPECT_EQ(NvSciSyncFenceWait(&f, s.ctx, 0), NvSciError_Success);
  EXPECT_TRUE(s.output_matches(3));
}

TEST(CudlaStandalone, NeverSignalledPreFenceIsEndedByTheTaskTimeout) {
  Standalone s;
  ASSERT_EQ(cudlaSetTaskTimeoutInMs(s.dev, 50), cudlaSuccess);
  NvSciSyncFence pre = NvSciSyncFenceInitializer, eof = NvSciSyncFenceInitializer;
  ASSERT_EQ(NvSciSyncObjGenerateFence(s.pre_obj, &pre), NvSciError_Success);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(s.submit(&pre, &eof), cudlaSuccess);
  // The EOF fence is still signalled, so the waiter does not hang; the error is in cudlaGetLastError.
  ASSERT_EQ(NvSciSyncFenceWait(&eof, s.ctx, 10'000'000), NvSciError_Success);
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(45));
  EXPECT_EQ(cudlaGetLastError(s.dev), cudlaErrorDlaErrEngineTimeout);
  NvSciSyncFenceClear(&pre);
}

TEST(CudlaStandalone, InjectedFaultStillSignalsTheEofFence) {
  Standalone s;
  s.fill_input(7);
  std::memset(s.cpu[1], 0x55, s.bytes);
  setenv("SOFTDLA_FAULT", "ProcessorBusy@0", 1);
  NvSciSyncFence eof0 = NvSciSyncFenceInitializer, eof1 = NvSciSyncFenceInitializer;
  ASSERT_EQ(s.submit(nullptr, &eof0), cudlaSuccess);  // task 0 faults
  ASSERT_EQ(NvSciSyncFenceWait(&eof0, s.ctx, 10'000'000), NvSciError_Success);
  EXPECT_EQ(cudlaGetLastError(s.dev), cudlaErrorDlaErrProcessorBusy);
  EXPECT_FALSE(s.output_matches(7));  // it did no work
  ASSERT_EQ(s.submit(nullptr, &eof1), cudlaSuccess);  // task 1 runs
  ASSERT_EQ(NvSciSyncFenceWait(&eof1, s.ctx, 10'000'000), NvSciError_Success);
  unsetenv("SOFTDLA_FAULT");
  EXPECT_EQ(cudlaGetLastError(s.dev), cudlaSuccess);
  EXPECT_TRUE(s.output_matches(7));
  NvSciSyncFenceClear(&eof0);
  NvSciSyncFenceClear(&eof1);
}

TEST(CudlaStandalone, DestroyWithATaskStillWaitingReturnsPromptly) {
  Standalone s;
  NvSciSyncFence pre = NvSciSyncFenceInitializer, eof = NvSciSyncFenceInitializer;
  ASSERT_EQ(NvSciSyncObjGenerateFence(s.pre_obj, &pre), NvSciError_Success);
  ASSERT_EQ(s.submit(&pre, &eof), cudlaSuccess);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(cudlaDestroyDevice(s.dev), cudlaSuccess);  // the default timeout is 30 s; no waiting for it
  s.dev = nullptr;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_EQ(NvSciSyncFenceWait(&eof, s.ctx, 0), NvSciError_Success);
}

TEST(CudlaStandalone, ImportsFreedByTheApplicationStayValidForQueuedTasks) {
  Standalone s;
  s.fill_input(10);
  NvSciSyncFence pre = NvSciSyncFenceInitializer, eof = NvSciSyncFenceInitializer;
  ASSERT_EQ(NvSciSyncObjGenerateFence(s.pre_obj, &pre), NvSciError_Success);
  ASSERT_EQ(s.submit(&pre, &eof), cudlaSuccess);
  // Unregister and free the input while the task waits: the task keeps its own references.
  ASSERT_EQ(cudlaMemUnregister(s.dev, s.dla[0]), cudlaSuccess);
  NvSciBufObjFree(s.bufs[0]);
  s.bufs[0] = nullptr;
  ASSERT_EQ(NvSciSyncObjSignal(s.pre_obj), NvSciError_Success);
  ASSERT_EQ(NvSciSyncFenceWait(&eof, s.ctx, 10'000'000), NvSciError_Success);
  EXPECT_TRUE(s.output_matches(10));
}

TEST(CudlaStandalone, SubmitErrors) {
  Standalone s;
  NvSciSyncFence eof = NvSciSyncFenceInitializer;
  const uint64_t* inputs[] = {s.dla[0]};
  uint64_t* outputs[] = {s.eof_sem};  // a semaphore is not tensor memory
  cudlaTask t = one_in_one_out(s.module, inputs, outputs);
  EXPECT_EQ(cudlaSubmitTask(s.dev, &t, 1, nullptr, 0), cudlaErrorInvalidAddress);
  outputs[0] = s.dla[1];
  uint64_t* not_sem[] = {s.dla[1]};
  CudlaFence f{&eof, CUDLA_NVSCISYNC_FENCE};
  cudlaSignalEvents bad_sem{not_sem, &f, 1};
  t.signalEvents = &bad_sem;
  EXPECT_EQ(cudlaSubmitTask(s.dev, &t, 1, nullptr, 0), cudlaErrorInvalidAddress);
  uint64_t* sems[] = {s.eof_sem};
  CudlaFence null_fence{nullptr, CUDLA_NVSCISYNC_FENCE};
  cudlaSignalEvents no_fence{sems, &null_fence, 1};
  t.signalEvents = &no_fence;
  EXPECT_EQ(cudlaSubmitTask(s.dev, &t, 1, nullptr, 0), cudlaErrorInvalidParam);
  t.signalEvents = nullptr;
  NvSciSyncFence garbage = {{1, 2, 3, 4, 5, 6}};
  CudlaFence pre{&garbage, CUDLA_NVSCISYNC_FENCE};
  cudlaWaitEvents wait{&pre, 1};
  t.waitEvents = &wait;
  EXPECT_EQ(cudlaSubmitTask(s.dev, &t, 1, nullptr, 0), cudlaErrorNvSci);
  CudlaFence sof_pre{&eof, CUDLA_NVSCISYNC_FENCE_SOF};
  cudlaWaitEvents wait_sof{&sof_pre, 1};
  t.waitEvents = &wait_sof;
  EXPECT_EQ(cudlaSubmitTask(s.dev, &t, 1, nullptr, 0), cudlaErrorUnsupportedOperation);
  // Imports: twice, and with a freed object.
  cudlaExternalMemoryHandleDesc again{s.bufs[0], s.bytes};
  uint64_t* p = nullptr;
  EXPECT_EQ(cudlaImportExternalMemory(s.dev, &again, &p, 0), cudlaErrorMemoryRegistered);
  cudlaExternalMemoryHandleDesc too_big{s.bufs[0], s.bytes + 1};
  EXPECT_EQ(cudlaImportExternalMemory(s.dev, &too_big, &p, 0), cudlaErrorInvalidParam);
  cudlaExternalSemaphoreHandleDesc sem_again{s.eof_obj};
  EXPECT_EQ(cudlaImportExternalSemaphore(s.dev, &sem_again, &p, 0), cudlaErrorMemoryRegistered);
  cudlaExternalMemoryHandleDesc forged{reinterpret_cast<void*>(0x999), 64};
  EXPECT_EQ(cudlaImportExternalMemory(s.dev, &forged, &p, 0), cudlaErrorNvSci);
  cudlaExternalSemaphoreHandleDesc forged_sem{reinterpret_cast<void*>(0x999)};
  EXPECT_EQ(cudlaImportExternalSemaphore(s.dev, &forged_sem, &p, 0), cudlaErrorNvSci);
}

// Memory imported with CUDLA_READ_ONLY_PERM may be a task's input, never its output: the output was
// written (the flag was dropped at import).
TEST(CudlaStandalone, MemoryImportedReadOnlyIsNeverWritten) {
  Standalone s;
  const auto loadable = tiny_loadable();
  cudlaDevHandle dev = nullptr;
  cudlaModule module = nullptr;
  ASSERT_EQ(cudlaCreateDevice(0, &dev, CUDLA_STANDALONE), cudlaSuccess);
  ASSERT_EQ(cudlaModuleLoadFromMemory(dev, loadable.data(), loadable.size(), &module, 0), cudlaSuccess);
  uint64_t* in = nullptr;
  uint64_t* out = nullptr;
  cudlaExternalMemoryHandleDesc din{s.bufs[0], s.bytes}, dout{s.bufs[1], s.bytes};
  ASSERT_EQ(cudlaImportExternalMemory(dev, &din, &in, CUDLA_READ_ONLY_PERM), cudlaSuccess);
  ASSERT_EQ(cudlaImportExternalMemory(dev, &dout, &out, CUDLA_READ_ONLY_PERM), cudlaSuccess);
  s.fill_input(3);
  std::memset(s.cpu[1], 0x5a, s.bytes);
  const uint64_t* inputs[] = {in};
  uint64_t* outputs[] = {out};
  cudlaTask t = one_in_one_out(module, inputs, outputs);
  EXPECT_EQ(cudlaSubmitTask(dev, &t, 1, nullptr, 0), cudlaErrorInvalidAddress);
  ASSERT_EQ(cudlaMemUnregister(dev, out), cudlaSuccess);
  ASSERT_EQ(cudlaImportExternalMemory(dev, &dout, &out, CUDLA_READ_WRITE_PERM), cudlaSuccess);
  outputs[0] = out;
  // A read-only input is fine; the task signals an EOF fence the test waits on before reading the output.
  NvSciSyncObj done = s.sync_object(CUDLA_NVSCISYNC_ATTR_SIGNAL, NvSciSyncAccessPerm_WaitOnly);
  cudlaExternalSemaphoreHandleDesc sd{done};
  uint64_t* sem = nullptr;
  ASSERT_EQ(cudlaImportExternalSemaphore(dev, &sd, &sem, 0), cudlaSuccess);
  NvSciSyncFence eof = NvSciSyncFenceInitializer;
  CudlaFence eof_fence{&eof, CUDLA_NVSCISYNC_FENCE};
  uint64_t* sems[] = {sem};
  cudlaSignalEvents signal{sems, &eof_fence, 1};
  t.signalEvents = &signal;
  ASSERT_EQ(cudlaSubmitTask(dev, &t, 1, nullptr, 0), cudlaSuccess);
  ASSERT_EQ(NvSciSyncFenceWait(&eof, s.ctx, 10'000'000), NvSciError_Success);
  EXPECT_TRUE(s.output_matches(3));
  NvSciSyncFenceClear(&eof);
  EXPECT_EQ(cudlaDestroyDevice(dev), cudlaSuccess);
  NvSciSyncObjFree(done);
}

// A task of events alone (no tensors): not implemented, and said so, with or without a module loaded.
TEST(CudlaStandalone, EventOnlyTasksAreUnsupported) {
  Standalone s;
  cudlaTask t{};
  t.moduleHandle = s.module;
  EXPECT_EQ(cudlaSubmitTask(s.dev, &t, 1, nullptr, 0), cudlaErrorUnsupportedOperation);
  cudlaDevHandle bare = nullptr;
  ASSERT_EQ(cudlaCreateDevice(0, &bare, CUDLA_STANDALONE), cudlaSuccess);
  t.moduleHandle = nullptr;
  EXPECT_EQ(cudlaSubmitTask(bare, &t, 1, nullptr, 0), cudlaErrorUnsupportedOperation);
  EXPECT_EQ(cudlaDestroyDevice(bare), cudlaSuccess);
}

TEST(CudlaStandalone, SofAndEofFencesOnOneObject) {
  Standalone s;
  s.fill_input(0);
  const uint64_t* inputs[] = {s.dla[0]};
  uint64_t* outputs[] = {s.dla[1]};
  uint64_t* sems[] = {s.eof_sem, s.eof_sem};
  NvSciSyncFence sof = NvSciSyncFenceInitializer, eof = NvSciSyncFenceInitializer;
  CudlaFence fences[] = {{&eof, CUDLA_NVSCISYNC_FENCE}, {&sof, CUDLA_NVSCISYNC_FENCE_SOF}};
  cudlaSignalEvents signal{sems, fences, 2};
  cudlaTask t = one_in_one_out(s.module, inputs, outputs);
  t.signalEvents = &signal;
  ASSERT_EQ(cudlaSubmitTask(s.dev, &t, 1, nullptr, 0), cudlaSuccess);
  ASSERT_EQ(NvSciSyncFenceWait(&eof, s.ctx, 10'000'000), NvSciError_Success);
  EXPECT_EQ(NvSciSyncFenceWait(&sof, s.ctx, 0), NvSciError_Success);
  uint64_t id_s, v_s, id_e, v_e;
  ASSERT_EQ(NvSciSyncFenceExtractFence(&sof, &id_s, &v_s), NvSciError_Success);
  ASSERT_EQ(NvSciSyncFenceExtractFence(&eof, &id_e, &v_e), NvSciError_Success);
  EXPECT_LT(v_s, v_e);  // start of frame before end of frame
  EXPECT_TRUE(s.output_matches(0));
}

}  // namespace
}  // namespace softdla::testing
