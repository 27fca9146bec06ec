// NvSciSyncAttrListReconcile: one signaler and at least one waiter, every list stating its permission;
// otherwise a conflict list naming the offending keys (docs/NVSCI.md).
#include <algorithm>
#include <cstring>

#include "sync_state.h"

using namespace softdla::nvsci;

extern "C" NvSciError NvSciSyncAttrListReconcile(const NvSciSyncAttrList inputArray[], size_t inputCount,
                                                 NvSciSyncAttrList* newReconciledList,
                                                 NvSciSyncAttrList* newConflictList) {
  if (!inputArray || inputCount == 0 || !newReconciledList || !newConflictList) return NvSciError_BadParameter;
  std::vector<std::shared_ptr<SyncAttrList>> lists;
  for (size_t i = 0; i < inputCount; ++i) {
    auto l = sync_lists().find(inputArray[i]);
    if (!l) return NvSciError_BadParameter;
    if (!lists.empty() && l->module != lists.front()->module) return NvSciError_BadParameter;
    if (std::find(lists.begin(), lists.end(), l) != lists.end()) return NvSciError_BadParameter;
    lists.push_back(std::move(l));
  }
  auto ordered = lists;  // locked in address order, so two reconciles never deadlock
  std::sort(ordered.begin(), ordered.end());
  std::vector<std::unique_lock<std::mutex>> locks;
  for (auto& l : ordered) locks.emplace_back(l->mutex);

  bool conflict = false, cpu = false;
  uint32_t perms = 0;
  int signalers = 0, waiters = 0;
  for (auto& l : lists) {
    if (l->kind != SyncListKind::Unreconciled) return NvSciError_BadParameter;
    auto p = l->values.find(NvSciSyncAttrKey_RequiredPerm);
    if (p == l->values.end()) {
      conflict = true;  // a list that states no permission
      continue;
    }
    uint32_t perm;
    std::memcpy(&perm, p->second.data(), sizeof(perm));
    perms |= perm;
    signalers += (perm & NvSciSyncAccessPerm_SignalOnly) ? 1 : 0;
    waiters += (perm & NvSciSyncAccessPerm_WaitOnly) ? 1 : 0;
    auto c = l->values.find(NvSciSyncAttrKey_NeedCpuAccess);
    if (c != l->values.end() && c->second[0]) cpu = true;
  }
  locks.clear();

  auto result = std::make_shared<SyncAttrList>();
  result->module = lists.front()->module;
  auto put = [&](uint32_t key, const void* v, size_t n) {
    const auto* b = static_cast<const uint8_t*>(v);
    result->values[key].assign(b, b + n);
  };
  if (conflict || signalers != 1 || waiters == 0) {
    result->kind = SyncListKind::Conflict;
    put(NvSciSyncAttrKey_RequiredPerm, &perms, sizeof(perms));
    *newReconciledList = nullptr;
    *newConflictList = to_handle<NvSciSyncAttrList>(sync_lists().add(std::move(result)));
    return NvSciError_ReconciliationFailed;
  }
  result->kind = SyncListKind::Reconciled;
  put(NvSciSyncAttrKey_NeedCpuAccess, &cpu, sizeof(cpu));
  put(NvSciSyncAttrKey_RequiredPerm, &perms, sizeof(perms));
  put(NvSciSyncAttrKey_ActualPerm, &perms, sizeof(perms));
  *newReconciledList = to_handle<NvSciSyncAttrList>(sync_lists().add(std::move(result)));
  *newConflictList = nullptr;
  return NvSciError_Success;
}
