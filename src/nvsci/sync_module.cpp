// NvSciSync modules, CPU wait contexts, and the handle and timeline tables of libnvscisync.so.1.
#include <unordered_map>

#include "sync_state.h"

namespace softdla::nvsci {

HandleTable<SyncModule>& sync_modules() {
  static HandleTable<SyncModule> t(0x5c01);
  return t;
}
HandleTable<SyncAttrList>& sync_lists() {
  static HandleTable<SyncAttrList> t(0x5c02);
  return t;
}
HandleTable<SyncObj>& sync_objects() {
  static HandleTable<SyncObj> t(0x5c03);
  return t;
}
HandleTable<SyncWaitContext>& sync_wait_contexts() {
  static HandleTable<SyncWaitContext> t(0x5c04);
  return t;
}

namespace {
struct Timelines {
  std::mutex mutex;
  std::unordered_map<uint64_t, std::weak_ptr<SyncTimeline>> map;
  uint64_t next = 0;
};
Timelines& timelines() {
  static Timelines t;
  return t;
}
}  // namespace

// Removes the timeline's entry when the last object handle to it is gone.
std::shared_ptr<SyncTimeline> new_timeline() {
  auto& t = timelines();
  std::lock_guard<std::mutex> lock(t.mutex);
  uint64_t id = ++t.next;
  auto* raw = new SyncTimeline;
  raw->id = id;
  std::shared_ptr<SyncTimeline> tl(raw, [](SyncTimeline* p) {
    {
      auto& ts = timelines();
      std::lock_guard<std::mutex> l(ts.mutex);
      ts.map.erase(p->id);
    }
    delete p;
  });
  t.map[id] = tl;
  return tl;
}

std::shared_ptr<SyncTimeline> find_timeline(uint64_t id) {
  auto& t = timelines();
  std::lock_guard<std::mutex> lock(t.mutex);
  auto it = t.map.find(id);
  return it == t.map.end() ? nullptr : it->second.lock();
}

}  // namespace softdla::nvsci

using namespace softdla::nvsci;

extern "C" NvSciError NvSciSyncModuleOpen(NvSciSyncModule* newModule) {
  if (!newModule) return NvSciError_BadParameter;
  *newModule = to_handle<NvSciSyncModule>(sync_modules().add(std::make_shared<SyncModule>()));
  return NvSciError_Success;
}

// What was made from a module stays usable after it is closed; only new lists and contexts are refused.
extern "C" void NvSciSyncModuleClose(NvSciSyncModule module) {
  if (auto m = sync_modules().remove(module)) m->open = false;
}

extern "C" NvSciError NvSciSyncCpuWaitContextAlloc(NvSciSyncModule module, NvSciSyncCpuWaitContext* newContext) {
  if (!newContext) return NvSciError_BadParameter;
  auto m = sync_modules().find(module);
  if (!m || !m->open) return NvSciError_BadParameter;
  auto ctx = std::make_shared<SyncWaitContext>();
  ctx->module = m;
  *newContext = to_handle<NvSciSyncCpuWaitContext>(sync_wait_contexts().add(std::move(ctx)));
  return NvSciError_Success;
}

extern "C" void NvSciSyncCpuWaitContextFree(NvSciSyncCpuWaitContext context) { sync_wait_contexts().remove(context); }
