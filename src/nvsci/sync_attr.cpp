// NvSciSync attribute lists: create, free, set (once per key, unreconciled lists only), get.
#include <cstring>

#include "sync_state.h"

using namespace softdla::nvsci;

namespace {

// The value size of a key an application may set, or 0 when it may not set it.
size_t settable_len(uint32_t key) {
  switch (key) {
    case NvSciSyncAttrKey_NeedCpuAccess:
    case NvSciSyncAttrKey_WaiterContextInsensitiveFenceExports:
    case NvSciSyncAttrKey_WaiterRequireTimestamps:
    case NvSciSyncAttrKey_RequireDeterministicFences: return sizeof(bool);
    case NvSciSyncAttrKey_RequiredPerm: return sizeof(NvSciSyncAccessPerm);
    default: return 0;
  }
}

bool known_key(uint32_t key) { return key > NvSciSyncAttrKey_LowerBound && key < NvSciSyncAttrKey_UpperBound; }

}  // namespace

extern "C" NvSciError NvSciSyncAttrListCreate(NvSciSyncModule module, NvSciSyncAttrList* attrList) {
  if (!attrList) return NvSciError_BadParameter;
  auto m = sync_modules().find(module);
  if (!m || !m->open) return NvSciError_BadParameter;
  auto list = std::make_shared<SyncAttrList>();
  list->module = m;
  *attrList = to_handle<NvSciSyncAttrList>(sync_lists().add(std::move(list)));
  return NvSciError_Success;
}

extern "C" void NvSciSyncAttrListFree(NvSciSyncAttrList attrList) { sync_lists().remove(attrList); }

extern "C" NvSciError NvSciSyncAttrListSetAttrs(NvSciSyncAttrList attrList, const NvSciSyncAttrKeyValuePair* pairArray,
                                                size_t pairCount) {
  auto list = sync_lists().find(attrList);
  if (!list || !pairArray || pairCount == 0) return NvSciError_BadParameter;
  std::lock_guard<std::mutex> lock(list->mutex);
  if (list->kind != SyncListKind::Unreconciled) return NvSciError_BadParameter;
  for (size_t i = 0; i < pairCount; ++i) {  // all checked first: a failed call changes nothing
    const auto& p = pairArray[i];
    uint32_t key = static_cast<uint32_t>(p.attrKey);
    size_t len = settable_len(key);
    if (len == 0 || !p.value || p.len != len || list->values.count(key)) return NvSciError_BadParameter;
    for (size_t j = 0; j < i; ++j)
      if (pairArray[j].attrKey == p.attrKey) return NvSciError_BadParameter;
    if (key == NvSciSyncAttrKey_RequiredPerm) {
      uint32_t perm;  // read as an integer: any value may arrive, not only the enumerators
      std::memcpy(&perm, p.value, sizeof(perm));
      if (perm == NvSciSyncAccessPerm_Auto) return NvSciError_NotSupported;  // docs/NVSCI.md
      if (perm != NvSciSyncAccessPerm_WaitOnly && perm != NvSciSyncAccessPerm_SignalOnly &&
          perm != NvSciSyncAccessPerm_WaitSignal)
        return NvSciError_BadParameter;
    }
  }
  for (size_t i = 0; i < pairCount; ++i) {
    const auto* b = static_cast<const uint8_t*>(pairArray[i].value);
    list->values[static_cast<uint32_t>(pairArray[i].attrKey)].assign(b, b + pairArray[i].len);
  }
  return NvSciError_Success;
}

extern "C" NvSciError NvSciSyncAttrListGetAttrs(NvSciSyncAttrList attrList, NvSciSyncAttrKeyValuePair* pairArray,
                                                size_t pairCount) {
  auto list = sync_lists().find(attrList);
  if (!list || !pairArray || pairCount == 0) return NvSciError_BadParameter;
  std::lock_guard<std::mutex> lock(list->mutex);
  if (list->kind == SyncListKind::Conflict) return NvSciError_BadParameter;
  for (size_t i = 0; i < pairCount; ++i)
    if (!known_key(static_cast<uint32_t>(pairArray[i].attrKey))) return NvSciError_BadParameter;
  for (size_t i = 0; i < pairCount; ++i) {
    auto it = list->values.find(static_cast<uint32_t>(pairArray[i].attrKey));
    pairArray[i].value = it == list->values.end() ? nullptr : it->second.data();
    pairArray[i].len = it == list->values.end() ? 0 : it->second.size();
  }
  return NvSciError_Success;
}

extern "C" NvSciError NvSciSyncAttrListIsReconciled(NvSciSyncAttrList attrList, bool* isReconciled) {
  auto list = sync_lists().find(attrList);
  if (!list || !isReconciled) return NvSciError_BadParameter;
  std::lock_guard<std::mutex> lock(list->mutex);
  *isReconciled = list->kind == SyncListKind::Reconciled;
  return NvSciError_Success;
}
