// The NvSciBuf attribute keys softdla knows: value sizes, and which ones an application may set.
#include "buf_state.h"

namespace softdla::nvsci {

bool buf_key_shape(uint32_t key, size_t* fixed_len, size_t* elem_size, bool* settable) {
  *fixed_len = 0;
  *elem_size = 1;
  *settable = true;
  switch (key) {
    case NvSciBufGeneralAttrKey_Types: *elem_size = sizeof(NvSciBufType); return true;
    case NvSciBufGeneralAttrKey_NeedCpuAccess:
    case NvSciBufGeneralAttrKey_EnableCpuCache: *fixed_len = sizeof(bool); return true;
    case NvSciBufGeneralAttrKey_RequiredPerm: *fixed_len = sizeof(NvSciBufAttrValAccessPerm); return true;
    case NvSciBufGeneralAttrKey_GpuId: return true;  // any bytes; softdla has no GPU mappings
    case NvSciBufGeneralAttrKey_CpuNeedSwCacheCoherency: *fixed_len = sizeof(bool); *settable = false; return true;
    case NvSciBufGeneralAttrKey_ActualPerm:
      *fixed_len = sizeof(NvSciBufAttrValAccessPerm);
      *settable = false;
      return true;
    case NvSciBufRawBufferAttrKey_Size:
    case NvSciBufRawBufferAttrKey_Align: *fixed_len = sizeof(uint64_t); return true;
    case NvSciBufTensorAttrKey_DataType: *fixed_len = sizeof(NvSciBufAttrValDataType); return true;
    case NvSciBufTensorAttrKey_NumDims: *fixed_len = sizeof(uint32_t); return true;
    case NvSciBufTensorAttrKey_SizePerDim: *elem_size = sizeof(uint64_t); return true;
    case NvSciBufTensorAttrKey_AlignmentPerDim: *elem_size = sizeof(uint32_t); return true;
    case NvSciBufTensorAttrKey_StridesPerDim: *elem_size = sizeof(uint64_t); *settable = false; return true;
    case NvSciBufTensorAttrKey_PixelFormat: *fixed_len = sizeof(uint32_t); return true;
    case NvSciBufTensorAttrKey_BaseAddrAlign: *fixed_len = sizeof(uint64_t); return true;
    case NvSciBufTensorAttrKey_Size: *fixed_len = sizeof(uint64_t); *settable = false; return true;
    default: return false;
  }
}

}  // namespace softdla::nvsci
