// NvSciSync's objects behind the handles (sync_*.cpp).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "handle_table.h"
#include "nvscisync.h"

namespace softdla::nvsci {

struct SyncModule {
  std::atomic<bool> open{true};
};

enum class SyncListKind { Unreconciled, Reconciled, Conflict };

struct SyncAttrList {
  std::shared_ptr<SyncModule> module;
  SyncListKind kind = SyncListKind::Unreconciled;
  std::mutex mutex;  // guards values of an unreconciled list
  std::map<uint32_t, std::vector<uint8_t>> values;
};

// One timeline: fences are points on it (thresholds), NvSciSyncObjSignal moves it on by one. Shared by
// every NvSciSyncObj handle duplicated from one allocation.
struct SyncTimeline {
  uint64_t id = 0;  // never reused; fences name their timeline by it
  bool cpu_signal = false;  // the reconciled list lets the CPU signal (NeedCpuAccess and signal permission)
  std::mutex mutex;
  std::condition_variable cv;
  uint64_t signaled = 0;   // points reached
  uint64_t generated = 0;  // points handed out by NvSciSyncObjGenerateFence
};

struct SyncObj {
  std::shared_ptr<SyncTimeline> timeline;
};

struct SyncWaitContext {
  std::shared_ptr<SyncModule> module;
};

HandleTable<SyncModule>& sync_modules();
HandleTable<SyncAttrList>& sync_lists();
HandleTable<SyncObj>& sync_objects();
HandleTable<SyncWaitContext>& sync_wait_contexts();

// Timelines by id, for fences (weak: a fence does not keep its object alive).
std::shared_ptr<SyncTimeline> new_timeline();
std::shared_ptr<SyncTimeline> find_timeline(uint64_t id);

// A fence's payload: {timeline id, threshold, check word, 0, 0, 0}; all zero is the cleared fence.
void encode_fence(const SyncTimeline& t, uint64_t threshold, NvSciSyncFence* f);
bool is_cleared(const NvSciSyncFence& f);
bool decode_fence(const NvSciSyncFence& f, uint64_t* id, uint64_t* threshold);  // false: not a fence

}  // namespace softdla::nvsci
