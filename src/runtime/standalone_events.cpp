// A standalone task's wait and signal events: pre-fences copied at submit, imported semaphores looked up,
// and the SOF/EOF fences the application passed filled in (docs/RUNTIME.md, "Standalone mode").
#include "standalone_events.h"

#include "nvsci_loader.h"
#include "status.h"

namespace softdla::rt {
namespace {

constexpr uint32_t kMaxPreAndSofFences = 29, kMaxEofFences = 29;  // NVIDIA's per-task limits
const char* const kFn = "cudlaSubmitTask";

}  // namespace

cudlaStatus resolve_events(const DeviceState& dev, const cudlaTask& t, size_t index, StandaloneJob& job) {
  const NvSciApi* api = nvsci();
  if ((t.waitEvents || t.signalEvents) && !api)
    return fail_status(cudlaErrorUnsupportedOperation, kFn, "task ", index, ": events need NvSci, which is not available");
  uint32_t sof = 0, eof = 0;
  if (const cudlaWaitEvents* w = t.waitEvents; w && w->numEvents) {
    if (!w->preFences) return fail_status(cudlaErrorInvalidParam, kFn, "task ", index, ": waitEvents->preFences is NULL");
    for (uint32_t i = 0; i < w->numEvents; ++i) {
      const CudlaFence& f = w->preFences[i];
      if (f.type != CUDLA_NVSCISYNC_FENCE)
        return fail_status(cudlaErrorUnsupportedOperation, kFn, "task ", index, ": preFence ", i,
                           " must have type CUDLA_NVSCISYNC_FENCE");
      if (!f.fence) return fail_status(cudlaErrorInvalidParam, kFn, "task ", index, ": preFence ", i, " is NULL");
      NvSciSyncFence copy = NvSciSyncFenceInitializer;
      if (api->sync_fence_dup(static_cast<const NvSciSyncFence*>(f.fence), &copy) != NvSciError_Success)
        return fail_status(cudlaErrorNvSci, kFn, "task ", index, ": preFence ", i, " is not an NvSciSyncFence");
      job.waits.push_back(copy);
    }
  }
  if (const cudlaSignalEvents* s = t.signalEvents; s && s->numEvents) {
    if (!s->devPtrs || !s->eofFences)
      return fail_status(cudlaErrorInvalidParam, kFn, "task ", index, ": signalEvents->devPtrs and eofFences must be set");
    for (uint32_t i = 0; i < s->numEvents; ++i) {
      const CudlaFence& f = s->eofFences[i];
      if (f.type != CUDLA_NVSCISYNC_FENCE && f.type != CUDLA_NVSCISYNC_FENCE_SOF)
        return fail_status(cudlaErrorUnsupportedOperation, kFn, "task ", index, ": signal fence ", i,
                           " has an unknown type ", int(f.type));
      if (!f.fence)
        return fail_status(cudlaErrorInvalidParam, kFn, "task ", index, ": signal fence ", i,
                           " is NULL (pass an NvSciSyncFence for cuDLA to fill)");
      const auto it = dev.regions.find(reinterpret_cast<uint64_t>(s->devPtrs[i]));
      if (it == dev.regions.end() || !it->second.semaphore)
        return fail_status(cudlaErrorInvalidAddress, kFn, "task ", index, ": signalEvents->devPtrs[", i,
                           "] is not a semaphore imported on this handle with cudlaImportExternalSemaphore");
      const bool is_sof = f.type == CUDLA_NVSCISYNC_FENCE_SOF;
      (is_sof ? job.sof : job.eof).push_back(it->second.semaphore);
      (is_sof ? job.sof_out : job.eof_out).push_back(f.fence);
      (is_sof ? sof : eof)++;
    }
  }
  if (job.waits.size() + sof > kMaxPreAndSofFences || eof > kMaxEofFences)
    return fail_status(cudlaErrorUnsupportedOperation, kFn, "task ", index, ": at most ", kMaxPreAndSofFences,
                       " pre-fences and SOF fences together, and ", kMaxEofFences, " EOF fences");
  return cudlaSuccess;
}

void fill_signal_fences(StandaloneJob& job) {
  const NvSciApi* api = nvsci();
  // SOF fences come before EOF fences on a timeline shared by both, in the order the task signals them.
  auto fill = [&](const std::vector<std::shared_ptr<ImportedSemaphore>>& sems, const std::vector<void*>& out) {
    for (size_t i = 0; i < sems.size(); ++i)
      if (api->sync_generate_fence(sems[i]->object, static_cast<NvSciSyncFence*>(out[i])) != NvSciError_Success)
        fail_status(cudlaErrorNvSci, kFn, "could not generate a fence on an imported NvSciSync object");
  };
  fill(job.sof, job.sof_out);
  fill(job.eof, job.eof_out);
}

}  // namespace softdla::rt
