// NvSciBuf attribute lists: create, free, set (once per key, unreconciled lists only), get.
#include <cstring>

#include "buf_state.h"

using namespace softdla::nvsci;

namespace {

bool is_power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

// Value checks beyond the size: enumerations in range, alignments powers of two.
bool valid_value(uint32_t key, const void* value, size_t len) {
  switch (key) {
    case NvSciBufGeneralAttrKey_Types: {
      for (size_t i = 0; i < len / sizeof(NvSciBufType); ++i) {
        int32_t t;  // read as integers: any value may arrive, not only the enumerators
        std::memcpy(&t, static_cast<const uint8_t*>(value) + i * sizeof(t), sizeof(t));
        if (t < NvSciBufType_General || t >= NvSciBufType_MaxValid) return false;
      }
      return len > 0;
    }
    case NvSciBufGeneralAttrKey_RequiredPerm: {
      int32_t p;
      std::memcpy(&p, value, sizeof(p));
      return p == NvSciBufAccessPerm_Readonly || p == NvSciBufAccessPerm_ReadWrite || p == NvSciBufAccessPerm_Auto;
    }
    case NvSciBufTensorAttrKey_DataType: {
      int32_t t;
      std::memcpy(&t, value, sizeof(t));
      return t >= NvSciDataType_Int4 && t < NvSciDataType_UpperBound;
    }
    case NvSciBufTensorAttrKey_NumDims: {
      uint32_t n;
      std::memcpy(&n, value, sizeof(n));
      return n >= 1 && n <= NV_SCI_BUF_TENSOR_MAX_DIMS;
    }
    case NvSciBufTensorAttrKey_SizePerDim: return len / sizeof(uint64_t) <= NV_SCI_BUF_TENSOR_MAX_DIMS;
    case NvSciBufTensorAttrKey_AlignmentPerDim: {
      if (len / sizeof(uint32_t) > NV_SCI_BUF_TENSOR_MAX_DIMS) return false;
      for (size_t i = 0; i < len / sizeof(uint32_t); ++i) {
        uint32_t a;
        std::memcpy(&a, static_cast<const uint8_t*>(value) + i * sizeof(a), sizeof(a));
        if (!is_power_of_two(a)) return false;
      }
      return true;
    }
    case NvSciBufRawBufferAttrKey_Align:
    case NvSciBufTensorAttrKey_BaseAddrAlign: {
      uint64_t a;
      std::memcpy(&a, value, sizeof(a));
      return is_power_of_two(a);
    }
    default: return true;
  }
}

}  // namespace

extern "C" NvSciError NvSciBufAttrListCreate(NvSciBufModule module, NvSciBufAttrList* newAttrList) {
  if (!newAttrList) return NvSciError_BadParameter;
  auto m = buf_modules().find(module);
  if (!m || !m->open) return NvSciError_BadParameter;
  auto list = std::make_shared<BufAttrList>();
  list->module = m;
  *newAttrList = to_handle<NvSciBufAttrList>(buf_lists().add(std::move(list)));
  return NvSciError_Success;
}

extern "C" void NvSciBufAttrListFree(NvSciBufAttrList attrList) { buf_lists().remove(attrList); }

extern "C" NvSciError NvSciBufAttrListSetAttrs(NvSciBufAttrList attrList, NvSciBufAttrKeyValuePair* pairArray,
                                               size_t pairCount) {
  auto list = buf_lists().find(attrList);
  if (!list || !pairArray || pairCount == 0) return NvSciError_BadParameter;
  std::lock_guard<std::mutex> lock(list->mutex);
  if (list->kind != ListKind::Unreconciled) return NvSciError_BadParameter;
  // All pairs are checked before any is stored: a failed call leaves the list as it was.
  for (size_t i = 0; i < pairCount; ++i) {
    const auto& p = pairArray[i];
    size_t fixed = 0, elem = 1;
    bool settable = false;
    uint32_t key = static_cast<uint32_t>(p.key);
    if (!buf_key_shape(key, &fixed, &elem, &settable) || !settable) return NvSciError_BadParameter;
    if (!p.value || p.len == 0 || (fixed ? p.len != fixed : p.len % elem != 0)) return NvSciError_BadParameter;
    if (list->values.count(key)) return NvSciError_BadParameter;  // each key may be set once
    for (size_t j = 0; j < i; ++j)
      if (pairArray[j].key == p.key) return NvSciError_BadParameter;
    if (!valid_value(key, p.value, p.len)) return NvSciError_BadParameter;
  }
  for (size_t i = 0; i < pairCount; ++i) {
    const auto* b = static_cast<const uint8_t*>(pairArray[i].value);
    list->values[static_cast<uint32_t>(pairArray[i].key)].assign(b, b + pairArray[i].len);
  }
  return NvSciError_Success;
}

// Keys that are not set come back with value NULL and len 0. The pointers stay valid while the list lives
// (a key is set at most once, so even an unreconciled list never moves a value).
extern "C" NvSciError NvSciBufAttrListGetAttrs(NvSciBufAttrList attrList, NvSciBufAttrKeyValuePair* pairArray,
                                               size_t pairCount) {
  auto list = buf_lists().find(attrList);
  if (!list || !pairArray || pairCount == 0) return NvSciError_BadParameter;
  std::lock_guard<std::mutex> lock(list->mutex);
  if (list->kind == ListKind::Conflict) return NvSciError_BadParameter;
  for (size_t i = 0; i < pairCount; ++i) {
    size_t fixed = 0, elem = 1;
    bool settable = false;
    if (!buf_key_shape(static_cast<uint32_t>(pairArray[i].key), &fixed, &elem, &settable))
      return NvSciError_BadParameter;
  }
  for (size_t i = 0; i < pairCount; ++i) {
    auto it = list->values.find(static_cast<uint32_t>(pairArray[i].key));
    pairArray[i].value = it == list->values.end() ? nullptr : it->second.data();
    pairArray[i].len = it == list->values.end() ? 0 : it->second.size();
  }
  return NvSciError_Success;
}

extern "C" NvSciError NvSciBufAttrListIsReconciled(NvSciBufAttrList attrList, bool* isReconciled) {
  auto list = buf_lists().find(attrList);
  if (!list || !isReconciled) return NvSciError_BadParameter;
  std::lock_guard<std::mutex> lock(list->mutex);
  *isReconciled = list->kind == ListKind::Reconciled;
  return NvSciError_Success;
}
