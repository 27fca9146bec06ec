// NvSciSync fences: values naming a point on a timeline. Clear, duplicate, extract, and wait on the CPU.
#include <chrono>
#include <cstring>

#include "sync_state.h"

namespace softdla::nvsci {

namespace {
constexpr uint64_t kCheck = 0x5d1a'f3c5'0000'0000ull;  // marks a payload as softdla's fence
uint64_t check_word(uint64_t id, uint64_t threshold) { return kCheck ^ (id * 0x9e3779b97f4a7c15ull) ^ threshold; }
}  // namespace

void encode_fence(const SyncTimeline& t, uint64_t threshold, NvSciSyncFence* f) {
  std::memset(f, 0, sizeof(*f));
  f->payload[0] = t.id;
  f->payload[1] = threshold;
  f->payload[2] = check_word(t.id, threshold);
}

bool is_cleared(const NvSciSyncFence& f) {
  for (uint64_t w : f.payload)
    if (w) return false;
  return true;
}

bool decode_fence(const NvSciSyncFence& f, uint64_t* id, uint64_t* threshold) {
  if (f.payload[0] == 0 || f.payload[2] != check_word(f.payload[0], f.payload[1]) || f.payload[3] || f.payload[4] ||
      f.payload[5])
    return false;
  *id = f.payload[0];
  *threshold = f.payload[1];
  return true;
}

}  // namespace softdla::nvsci

using namespace softdla::nvsci;

extern "C" void NvSciSyncFenceClear(NvSciSyncFence* syncFence) {
  if (syncFence) std::memset(syncFence, 0, sizeof(*syncFence));
}

extern "C" NvSciError NvSciSyncFenceDup(const NvSciSyncFence* srcSyncFence, NvSciSyncFence* dstSyncFence) {
  if (!srcSyncFence || !dstSyncFence || srcSyncFence == dstSyncFence) return NvSciError_BadParameter;
  uint64_t id, threshold;
  if (!is_cleared(*srcSyncFence) && !decode_fence(*srcSyncFence, &id, &threshold)) return NvSciError_BadParameter;
  *dstSyncFence = *srcSyncFence;
  return NvSciError_Success;
}

extern "C" NvSciError NvSciSyncFenceExtractFence(const NvSciSyncFence* syncFence, uint64_t* id, uint64_t* value) {
  if (!syncFence || !id || !value) return NvSciError_BadParameter;
  if (is_cleared(*syncFence)) return NvSciError_ClearedFence;
  return decode_fence(*syncFence, id, value) ? NvSciError_Success : NvSciError_BadParameter;
}

// timeoutUs: -1 waits forever, 0 only checks; NvSciError_Timeout when the point is not reached in time.
// A cleared fence is already expired.
extern "C" NvSciError NvSciSyncFenceWait(const NvSciSyncFence* syncFence, NvSciSyncCpuWaitContext context,
                                         int64_t timeoutUs) {
  if (!syncFence || timeoutUs < -1 || !sync_wait_contexts().find(context)) return NvSciError_BadParameter;
  if (is_cleared(*syncFence)) return NvSciError_Success;
  uint64_t id, threshold;
  if (!decode_fence(*syncFence, &id, &threshold)) return NvSciError_BadParameter;
  auto t = find_timeline(id);
  if (!t) return NvSciError_BadParameter;  // its object was freed: it can never be signalled
  std::unique_lock<std::mutex> lock(t->mutex);
  auto reached = [&] { return t->signaled >= threshold; };
  // Beyond about 12 days a timeout is taken as forever (a steady_clock deadline that far out could overflow).
  if (timeoutUs == -1 || timeoutUs > (int64_t(1) << 40)) {
    t->cv.wait(lock, reached);
    return NvSciError_Success;
  }
  return t->cv.wait_for(lock, std::chrono::microseconds(timeoutUs), reached) ? NvSciError_Success
                                                                              : NvSciError_Timeout;
}
