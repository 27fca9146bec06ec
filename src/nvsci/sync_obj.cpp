// NvSciSync objects: allocation from a reconciled list, duplicates sharing one timeline, fences, signals.
#include <cstring>

#include "sync_state.h"

using namespace softdla::nvsci;

extern "C" NvSciError NvSciSyncObjAlloc(NvSciSyncAttrList reconciledList, NvSciSyncObj* syncObj) {
  if (!syncObj) return NvSciError_BadParameter;
  auto list = sync_lists().find(reconciledList);
  if (!list || list->kind != SyncListKind::Reconciled) return NvSciError_BadParameter;
  bool cpu = false;
  uint32_t perm = 0;
  auto c = list->values.find(NvSciSyncAttrKey_NeedCpuAccess);
  if (c != list->values.end()) cpu = c->second[0] != 0;
  auto p = list->values.find(NvSciSyncAttrKey_ActualPerm);
  if (p != list->values.end()) std::memcpy(&perm, p->second.data(), sizeof(perm));
  auto obj = std::make_shared<SyncObj>();
  obj->timeline = new_timeline();
  obj->timeline->cpu_signal = cpu && (perm & NvSciSyncAccessPerm_SignalOnly);
  *syncObj = to_handle<NvSciSyncObj>(sync_objects().add(std::move(obj)));
  return NvSciError_Success;
}

extern "C" NvSciError NvSciSyncObjDup(NvSciSyncObj syncObj, NvSciSyncObj* dupObj) {
  auto obj = sync_objects().find(syncObj);
  if (!obj || !dupObj) return NvSciError_BadParameter;
  auto dup = std::make_shared<SyncObj>();
  dup->timeline = obj->timeline;
  *dupObj = to_handle<NvSciSyncObj>(sync_objects().add(std::move(dup)));
  return NvSciError_Success;
}

// The timeline lives until its last object handle is freed; fences on it then report BadParameter.
extern "C" void NvSciSyncObjFree(NvSciSyncObj syncObj) { sync_objects().remove(syncObj); }

// The next point on the timeline: the fence expires after as many signals as fences generated so far.
extern "C" NvSciError NvSciSyncObjGenerateFence(NvSciSyncObj syncObj, NvSciSyncFence* syncFence) {
  auto obj = sync_objects().find(syncObj);
  if (!obj || !syncFence) return NvSciError_BadParameter;
  auto& t = *obj->timeline;
  uint64_t threshold;
  {
    std::lock_guard<std::mutex> lock(t.mutex);
    threshold = ++t.generated;
  }
  encode_fence(t, threshold, syncFence);
  return NvSciError_Success;
}

// Moves the timeline on by one point and wakes its waiters. Only for objects the CPU may signal.
extern "C" NvSciError NvSciSyncObjSignal(NvSciSyncObj syncObj) {
  auto obj = sync_objects().find(syncObj);
  if (!obj || !obj->timeline->cpu_signal) return NvSciError_BadParameter;
  auto& t = *obj->timeline;
  {
    std::lock_guard<std::mutex> lock(t.mutex);
    ++t.signaled;
    if (t.generated < t.signaled) t.generated = t.signaled;  // a signal with no fence out still counts
  }
  t.cv.notify_all();
  return NvSciError_Success;
}
