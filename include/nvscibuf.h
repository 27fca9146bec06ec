/* NvSciBuf for cuDLA standalone programs (softdla). Buffers are process-local host memory; names and
 * enumeration values follow NVIDIA's public NvSciBuf API reference where it documents them, the rest
 * are softdla's choices (docs/NVSCI.md). Only what cuDLA programs use is declared. */
#ifndef INCLUDED_NVSCIBUF_H
#define INCLUDED_NVSCIBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "nvscierror.h"

#ifdef __cplusplus
extern "C" {
#endif

#define NV_SCI_BUF_TENSOR_MAX_DIMS 8u
#define NV_SCI_BUF_ATTRKEY_BIT_COUNT 16u
#define NV_SCI_BUF_DATATYPE_BIT_COUNT 10u
#define NV_SCI_BUF_ATTR_KEY_TYPE_PUBLIC 0u
#define NV_SCI_BUF_KEYTYPE_BIT_START (NV_SCI_BUF_DATATYPE_BIT_COUNT + NV_SCI_BUF_ATTRKEY_BIT_COUNT)
#define NV_SCI_BUF_ATTR_KEY_START(type) \
  ((NV_SCI_BUF_ATTR_KEY_TYPE_PUBLIC << NV_SCI_BUF_KEYTYPE_BIT_START) | ((uint32_t)(type) << NV_SCI_BUF_ATTRKEY_BIT_COUNT))

typedef enum {
  NvSciBufType_General = 0,
  NvSciBufType_RawBuffer = 1,
  NvSciBufType_Image = 2,
  NvSciBufType_Tensor = 3,
  NvSciBufType_Array = 4,
  NvSciBufType_Pyramid = 5,
  NvSciBufType_MaxValid = 6,
  NvSciBufType_UpperBound = 6
} NvSciBufType;

#define NV_SCI_BUF_GENERAL_ATTR_KEY_START NV_SCI_BUF_ATTR_KEY_START(NvSciBufType_General)
#define NV_SCI_BUF_RAW_BUF_ATTR_KEY_START NV_SCI_BUF_ATTR_KEY_START(NvSciBufType_RawBuffer)
#define NV_SCI_BUF_TENSOR_ATTR_KEY_START NV_SCI_BUF_ATTR_KEY_START(NvSciBufType_Tensor)

typedef enum {
  NvSciBufAttrKey_LowerBound = NV_SCI_BUF_GENERAL_ATTR_KEY_START,
  NvSciBufGeneralAttrKey_Types,                 /* NvSciBufType[]: the buffer's type(s); required */
  NvSciBufGeneralAttrKey_NeedCpuAccess,         /* bool: the CPU maps the buffer */
  NvSciBufGeneralAttrKey_RequiredPerm,          /* NvSciBufAttrValAccessPerm */
  NvSciBufGeneralAttrKey_EnableCpuCache,        /* bool */
  NvSciBufGeneralAttrKey_GpuId,                 /* accepted, ignored */
  NvSciBufGeneralAttrKey_CpuNeedSwCacheCoherency, /* bool, reconciled output */
  NvSciBufGeneralAttrKey_ActualPerm,            /* NvSciBufAttrValAccessPerm, reconciled output */
  NvSciBufRawBufferAttrKey_Size = NV_SCI_BUF_RAW_BUF_ATTR_KEY_START, /* uint64_t bytes; required */
  NvSciBufRawBufferAttrKey_Align,               /* uint64_t, power of two */
  NvSciBufTensorAttrKey_DataType = NV_SCI_BUF_TENSOR_ATTR_KEY_START, /* NvSciBufAttrValDataType; required */
  NvSciBufTensorAttrKey_NumDims,                /* uint32_t 1..8; required */
  NvSciBufTensorAttrKey_SizePerDim,             /* uint64_t[NumDims]; required */
  NvSciBufTensorAttrKey_AlignmentPerDim,        /* uint32_t[NumDims], powers of two */
  NvSciBufTensorAttrKey_StridesPerDim,          /* uint64_t[NumDims], reconciled output */
  NvSciBufTensorAttrKey_PixelFormat,            /* accepted, ignored */
  NvSciBufTensorAttrKey_BaseAddrAlign,          /* uint64_t, power of two */
  NvSciBufTensorAttrKey_Size,                   /* uint64_t bytes, reconciled output */
  NvSciBufAttrKey_UpperBound = 0x3ffffffu
} NvSciBufAttrKey;

typedef enum {
  NvSciDataType_Int4 = 0,
  NvSciDataType_Int8,
  NvSciDataType_Int16,
  NvSciDataType_Int32,
  NvSciDataType_Uint4,
  NvSciDataType_Uint8,
  NvSciDataType_Uint16,
  NvSciDataType_Uint32,
  NvSciDataType_Float16,
  NvSciDataType_Float32,
  NvSciDataType_FloatISP,
  NvSciDataType_Bool,
  NvSciDataType_UpperBound
} NvSciBufAttrValDataType;

typedef enum {
  NvSciBufAccessPerm_Readonly = 1,
  NvSciBufAccessPerm_ReadWrite = 3,
  NvSciBufAccessPerm_Auto = 4,
  NvSciBufAccessPerm_Invalid = 5
} NvSciBufAttrValAccessPerm;

typedef struct {
  NvSciBufAttrKey key;
  const void* value;
  size_t len;
} NvSciBufAttrKeyValuePair;

typedef struct NvSciBufModuleRec* NvSciBufModule;
typedef struct NvSciBufAttrListRec* NvSciBufAttrList;
typedef struct NvSciBufObjRefRec* NvSciBufObj;

NvSciError NvSciBufModuleOpen(NvSciBufModule* newModule);
void NvSciBufModuleClose(NvSciBufModule module);

NvSciError NvSciBufAttrListCreate(NvSciBufModule module, NvSciBufAttrList* newAttrList);
void NvSciBufAttrListFree(NvSciBufAttrList attrList);
NvSciError NvSciBufAttrListSetAttrs(NvSciBufAttrList attrList, NvSciBufAttrKeyValuePair* pairArray, size_t pairCount);
NvSciError NvSciBufAttrListGetAttrs(NvSciBufAttrList attrList, NvSciBufAttrKeyValuePair* pairArray, size_t pairCount);
NvSciError NvSciBufAttrListIsReconciled(NvSciBufAttrList attrList, bool* isReconciled);
NvSciError NvSciBufAttrListReconcile(const NvSciBufAttrList inputArray[], size_t inputCount,
                                     NvSciBufAttrList* newReconciledAttrList, NvSciBufAttrList* newConflictList);

NvSciError NvSciBufObjAlloc(NvSciBufAttrList reconciledAttrList, NvSciBufObj* bufObj);
NvSciError NvSciBufObjDup(NvSciBufObj bufObj, NvSciBufObj* dupObj);
void NvSciBufObjFree(NvSciBufObj bufObj);
NvSciError NvSciBufObjGetAttrList(NvSciBufObj bufObj, NvSciBufAttrList* bufAttrList);
NvSciError NvSciBufObjGetCpuPtr(NvSciBufObj bufObj, void** ptr);
NvSciError NvSciBufObjGetConstCpuPtr(NvSciBufObj bufObj, const void** ptr);

#ifdef __cplusplus
}
#endif
#endif /* INCLUDED_NVSCIBUF_H */
