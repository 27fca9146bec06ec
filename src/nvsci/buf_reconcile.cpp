// NvSciBufAttrListReconcile: merges unreconciled lists into one a buffer can be allocated from, or
// reports the keys the lists disagree on in a conflict list (docs/NVSCI.md lists the rules).
#include <algorithm>
#include <cstring>
#include <optional>
#include <string>

#include "buf_state.h"

using namespace softdla::nvsci;

namespace {

using Bytes = std::vector<uint8_t>;

template <typename T>
T read_as(const Bytes& b, size_t index = 0) {
  T v{};
  std::memcpy(&v, b.data() + index * sizeof(T), sizeof(T));
  return v;
}
template <typename T>
Bytes bytes_of(const T& v) {
  Bytes b(sizeof(T));
  std::memcpy(b.data(), &v, sizeof(T));
  return b;
}

uint64_t element_bits(NvSciBufAttrValDataType t) {
  switch (t) {
    case NvSciDataType_Int4:
    case NvSciDataType_Uint4: return 4;
    case NvSciDataType_Int8:
    case NvSciDataType_Uint8:
    case NvSciDataType_Bool: return 8;
    case NvSciDataType_Int16:
    case NvSciDataType_Uint16:
    case NvSciDataType_Float16: return 16;
    default: return 32;
  }
}

bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_mul_overflow(a, b, out); }
bool align_up(uint64_t v, uint64_t a, uint64_t* out) {
  if (__builtin_add_overflow(v, a - 1, out)) return true;
  *out &= ~(a - 1);
  return false;
}

struct Merge {
  std::vector<std::shared_ptr<BufAttrList>> lists;
  std::map<uint32_t, Bytes> out;
  std::vector<uint32_t> conflicts;  // keys the lists disagree on, or required keys nobody set

  // The value every list that sets `key` agrees on; a conflict when two differ.
  std::optional<Bytes> same(uint32_t key) {
    std::optional<Bytes> v;
    for (const auto& l : lists) {
      auto it = l->values.find(key);
      if (it == l->values.end()) continue;
      if (v && *v != it->second) {
        conflicts.push_back(key);
        return std::nullopt;
      }
      v = it->second;
    }
    return v;
  }
  std::optional<Bytes> required(uint32_t key) {
    size_t before = conflicts.size();
    auto v = same(key);
    if (!v && conflicts.size() == before) conflicts.push_back(key);
    return v;
  }
  template <typename T>
  T maximum(uint32_t key, T fallback) {
    T m = fallback;
    for (const auto& l : lists) {
      auto it = l->values.find(key);
      if (it != l->values.end()) m = std::max(m, read_as<T>(it->second));
    }
    return m;
  }
  bool any_true(uint32_t key, bool fallback) {
    bool seen = false, v = false;
    for (const auto& l : lists) {
      auto it = l->values.find(key);
      if (it == l->values.end()) continue;
      seen = true;
      v = v || read_as<bool>(it->second);
    }
    return seen ? v : fallback;
  }

  void general() {
    bool cpu = any_true(NvSciBufGeneralAttrKey_NeedCpuAccess, false);
    out[NvSciBufGeneralAttrKey_NeedCpuAccess] = bytes_of(cpu);
    out[NvSciBufGeneralAttrKey_EnableCpuCache] = bytes_of(any_true(NvSciBufGeneralAttrKey_EnableCpuCache, true));
    out[NvSciBufGeneralAttrKey_CpuNeedSwCacheCoherency] = bytes_of(false);
    int perm = NvSciBufAccessPerm_Readonly;
    for (const auto& l : lists) {
      auto it = l->values.find(NvSciBufGeneralAttrKey_RequiredPerm);
      if (it == l->values.end()) continue;
      int p = read_as<int>(it->second);
      if (p == NvSciBufAccessPerm_Auto) p = NvSciBufAccessPerm_ReadWrite;  // softdla's choice (NVSCI.md)
      perm = std::max(perm, p);
    }
    auto p = static_cast<NvSciBufAttrValAccessPerm>(perm);
    out[NvSciBufGeneralAttrKey_RequiredPerm] = bytes_of(p);
    out[NvSciBufGeneralAttrKey_ActualPerm] = bytes_of(p);
  }

  void raw() {
    auto size = maximum<uint64_t>(NvSciBufRawBufferAttrKey_Size, 0);
    if (size == 0) conflicts.push_back(NvSciBufRawBufferAttrKey_Size);
    out[NvSciBufRawBufferAttrKey_Size] = bytes_of(size);
    out[NvSciBufRawBufferAttrKey_Align] = bytes_of(maximum<uint64_t>(NvSciBufRawBufferAttrKey_Align, 1));
  }

  void tensor() {
    auto type = required(NvSciBufTensorAttrKey_DataType);
    auto ndims = required(NvSciBufTensorAttrKey_NumDims);
    auto sizes = required(NvSciBufTensorAttrKey_SizePerDim);
    if (!type || !ndims || !sizes) return;
    uint32_t n = read_as<uint32_t>(*ndims);
    if (sizes->size() != n * sizeof(uint64_t)) {
      conflicts.push_back(NvSciBufTensorAttrKey_SizePerDim);
      return;
    }
    std::vector<uint64_t> align(n, 1);
    for (const auto& l : lists) {
      auto it = l->values.find(NvSciBufTensorAttrKey_AlignmentPerDim);
      if (it == l->values.end()) continue;
      if (it->second.size() != n * sizeof(uint32_t)) {
        conflicts.push_back(NvSciBufTensorAttrKey_AlignmentPerDim);
        return;
      }
      for (uint32_t d = 0; d < n; ++d) align[d] = std::max<uint64_t>(align[d], read_as<uint32_t>(it->second, d));
    }
    // Dimension 0 is the outermost. The innermost stride is one element (rounded up to a byte); each
    // outer stride is the inner dimension's extent aligned to that dimension's alignment.
    uint64_t bits = element_bits(read_as<NvSciBufAttrValDataType>(*type));
    std::vector<uint64_t> strides(n);
    uint64_t stride = (bits + 7) / 8, extent = 0;
    bool overflow = false;
    for (uint32_t d = n; d-- > 0;) {
      strides[d] = stride;
      uint64_t count = read_as<uint64_t>(*sizes, d);
      if (count == 0) conflicts.push_back(NvSciBufTensorAttrKey_SizePerDim);
      if (d == n - 1 && bits < 8) {
        extent = (count * bits + 7) / 8;  // packed 4-bit elements
        overflow |= count > (UINT64_MAX - 7) / bits;
      } else {
        overflow |= mul_overflows(count, stride, &extent);
      }
      overflow |= align_up(extent, align[d], &stride);
    }
    if (overflow) conflicts.push_back(NvSciBufTensorAttrKey_SizePerDim);
    out[NvSciBufTensorAttrKey_DataType] = *type;
    out[NvSciBufTensorAttrKey_NumDims] = *ndims;
    out[NvSciBufTensorAttrKey_SizePerDim] = *sizes;
    Bytes a(n * sizeof(uint32_t));
    for (uint32_t d = 0; d < n; ++d) {
      uint32_t v = static_cast<uint32_t>(align[d]);
      std::memcpy(a.data() + d * sizeof(v), &v, sizeof(v));
    }
    out[NvSciBufTensorAttrKey_AlignmentPerDim] = a;
    Bytes s(n * sizeof(uint64_t));
    std::memcpy(s.data(), strides.data(), s.size());
    out[NvSciBufTensorAttrKey_StridesPerDim] = s;
    out[NvSciBufTensorAttrKey_BaseAddrAlign] = bytes_of(maximum<uint64_t>(NvSciBufTensorAttrKey_BaseAddrAlign, 1));
    out[NvSciBufTensorAttrKey_Size] = bytes_of(stride);
  }
};

}  // namespace

extern "C" NvSciError NvSciBufAttrListReconcile(const NvSciBufAttrList inputArray[], size_t inputCount,
                                                NvSciBufAttrList* newReconciledAttrList,
                                                NvSciBufAttrList* newConflictList) {
  if (!inputArray || inputCount == 0 || !newReconciledAttrList || !newConflictList) return NvSciError_BadParameter;
  Merge m;
  for (size_t i = 0; i < inputCount; ++i) {
    auto l = buf_lists().find(inputArray[i]);
    if (!l) return NvSciError_BadParameter;
    if (!m.lists.empty() && l->module != m.lists.front()->module) return NvSciError_BadParameter;
    m.lists.push_back(std::move(l));
  }
  // Hold every input's lock (in handle order, so two reconciles never deadlock) while reading them.
  std::vector<std::shared_ptr<BufAttrList>> ordered = m.lists;
  std::sort(ordered.begin(), ordered.end());
  ordered.erase(std::unique(ordered.begin(), ordered.end()), ordered.end());
  std::vector<std::unique_lock<std::mutex>> locks;
  for (auto& l : ordered) locks.emplace_back(l->mutex);
  for (auto& l : ordered)
    if (l->kind != ListKind::Unreconciled) return NvSciError_BadParameter;

  NvSciError status = NvSciError_Success;
  if (auto types = m.required(NvSciBufGeneralAttrKey_Types)) {
    m.out[NvSciBufGeneralAttrKey_Types] = *types;
    m.general();
    for (size_t i = 0; i < types->size() / sizeof(NvSciBufType); ++i) {
      auto t = read_as<NvSciBufType>(*types, i);
      if (t == NvSciBufType_RawBuffer && types->size() == sizeof(NvSciBufType)) m.raw();
      else if (t == NvSciBufType_Tensor && types->size() == sizeof(NvSciBufType)) m.tensor();
      else status = NvSciError_NotSupported;  // images, arrays, pyramids, several types at once
    }
  }
  locks.clear();
  if (status != NvSciError_Success) return status;

  auto result = std::make_shared<BufAttrList>();
  result->module = m.lists.front()->module;
  if (!m.conflicts.empty()) {
    result->kind = ListKind::Conflict;
    for (uint32_t key : m.conflicts) result->values[key] = {};
    *newReconciledAttrList = nullptr;
    *newConflictList = to_handle<NvSciBufAttrList>(buf_lists().add(std::move(result)));
    return NvSciError_ReconciliationFailed;
  }
  result->kind = ListKind::Reconciled;
  result->values = std::move(m.out);
  *newReconciledAttrList = to_handle<NvSciBufAttrList>(buf_lists().add(std::move(result)));
  *newConflictList = nullptr;
  return NvSciError_Success;
}
