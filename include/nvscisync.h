/* NvSciSync for cuDLA standalone programs (softdla): CPU-signalled timelines, fences, CPU waits. Names
 * and enumeration values follow NVIDIA's public NvSciSync API reference where it documents them, the
 * rest are softdla's choices (docs/NVSCI.md). Only what cuDLA programs use is declared. */
#ifndef INCLUDED_NVSCISYNC_H
#define INCLUDED_NVSCISYNC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "nvscierror.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct NvSciSyncModuleRec* NvSciSyncModule;
typedef struct NvSciSyncAttrListRec* NvSciSyncAttrList;
typedef struct NvSciSyncObjRec* NvSciSyncObj;
typedef struct NvSciSyncCpuWaitContextRec* NvSciSyncCpuWaitContext;

/* A fence is a value: copy it freely; NvSciSyncFenceClear empties it. All zero is the cleared fence. */
typedef struct {
  uint64_t payload[6];
} NvSciSyncFence;

#define NvSciSyncFenceInitializer {{0u, 0u, 0u, 0u, 0u, 0u}}

typedef enum {
  NvSciSyncAccessPerm_WaitOnly = 1u << 0,
  NvSciSyncAccessPerm_SignalOnly = 1u << 1,
  NvSciSyncAccessPerm_WaitSignal = (1u << 0) | (1u << 1),
  NvSciSyncAccessPerm_Auto = 1u << 3
} NvSciSyncAccessPerm;

typedef enum {
  NvSciSyncAttrKey_LowerBound = 0,
  NvSciSyncAttrKey_NeedCpuAccess,          /* bool */
  NvSciSyncAttrKey_RequiredPerm,           /* NvSciSyncAccessPerm */
  NvSciSyncAttrKey_ActualPerm,             /* NvSciSyncAccessPerm, reconciled output */
  NvSciSyncAttrKey_WaiterContextInsensitiveFenceExports, /* bool, accepted */
  NvSciSyncAttrKey_WaiterRequireTimestamps, /* bool, accepted */
  NvSciSyncAttrKey_RequireDeterministicFences, /* bool, accepted */
  NvSciSyncAttrKey_UpperBound
} NvSciSyncAttrKey;

typedef struct {
  NvSciSyncAttrKey attrKey;
  const void* value;
  size_t len;
} NvSciSyncAttrKeyValuePair;

NvSciError NvSciSyncModuleOpen(NvSciSyncModule* newModule);
void NvSciSyncModuleClose(NvSciSyncModule module);

NvSciError NvSciSyncCpuWaitContextAlloc(NvSciSyncModule module, NvSciSyncCpuWaitContext* newContext);
void NvSciSyncCpuWaitContextFree(NvSciSyncCpuWaitContext context);

NvSciError NvSciSyncAttrListCreate(NvSciSyncModule module, NvSciSyncAttrList* attrList);
void NvSciSyncAttrListFree(NvSciSyncAttrList attrList);
NvSciError NvSciSyncAttrListSetAttrs(NvSciSyncAttrList attrList, const NvSciSyncAttrKeyValuePair* pairArray,
                                     size_t pairCount);
NvSciError NvSciSyncAttrListGetAttrs(NvSciSyncAttrList attrList, NvSciSyncAttrKeyValuePair* pairArray,
                                     size_t pairCount);
NvSciError NvSciSyncAttrListIsReconciled(NvSciSyncAttrList attrList, bool* isReconciled);
NvSciError NvSciSyncAttrListReconcile(const NvSciSyncAttrList inputArray[], size_t inputCount,
                                      NvSciSyncAttrList* newReconciledList, NvSciSyncAttrList* newConflictList);

NvSciError NvSciSyncObjAlloc(NvSciSyncAttrList reconciledList, NvSciSyncObj* syncObj);
NvSciError NvSciSyncObjDup(NvSciSyncObj syncObj, NvSciSyncObj* dupObj);
void NvSciSyncObjFree(NvSciSyncObj syncObj);
NvSciError NvSciSyncObjGenerateFence(NvSciSyncObj syncObj, NvSciSyncFence* syncFence);
NvSciError NvSciSyncObjSignal(NvSciSyncObj syncObj);

void NvSciSyncFenceClear(NvSciSyncFence* syncFence);
NvSciError NvSciSyncFenceDup(const NvSciSyncFence* srcSyncFence, NvSciSyncFence* dstSyncFence);
NvSciError NvSciSyncFenceExtractFence(const NvSciSyncFence* syncFence, uint64_t* id, uint64_t* value);
NvSciError NvSciSyncFenceWait(const NvSciSyncFence* syncFence, NvSciSyncCpuWaitContext context, int64_t timeoutUs);

#ifdef __cplusplus
}
#endif
#endif /* INCLUDED_NVSCISYNC_H */
