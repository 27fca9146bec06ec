/* NvSci error codes (softdla). The names and values are those of NVIDIA's public NvSci API reference
 * (NvSciError enumeration); docs/NVSCI.md lists the codes softdla's NvSciBuf/NvSciSync return. */
#ifndef INCLUDED_NVSCI_ERROR_H
#define INCLUDED_NVSCI_ERROR_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  NvSciError_Success = 0x00000000,
  NvSciError_Unknown = 0x00000001,
  NvSciError_NotImplemented = 0x00000010,
  NvSciError_NotSupported = 0x00000011,
  NvSciError_AccessDenied = 0x00000020,
  NvSciError_NotPermitted = 0x00000021,
  NvSciError_InvalidState = 0x00000022,
  NvSciError_InvalidOperation = 0x00000023,
  NvSciError_NotInitialized = 0x00000024,
  NvSciError_AlreadyInUse = 0x00000025,
  NvSciError_AlreadyDone = 0x00000026,
  NvSciError_NotYetAvailable = 0x00000027,
  NvSciError_NoLongerAvailable = 0x00000028,
  NvSciError_InsufficientMemory = 0x00000030,
  NvSciError_InsufficientResource = 0x00000031,
  NvSciError_ResourceError = 0x00000032,
  NvSciError_BadParameter = 0x00000100,
  NvSciError_BadAddress = 0x00000101,
  NvSciError_TooBig = 0x00000102,
  NvSciError_Overflow = 0x00000103,
  NvSciError_InconsistentData = 0x00000104,
  NvSciError_InsufficientData = 0x00000105,
  NvSciError_IndexOutOfRange = 0x00000106,
  NvSciError_ValueOutOfRange = 0x00000107,
  NvSciError_Timeout = 0x00000200,
  NvSciError_TryItAgain = 0x00000201,
  NvSciError_Busy = 0x00000202,
  NvSciError_InterruptedCall = 0x00000203,
  NvSciError_NoSuchDevice = 0x00001000,
  NvSciError_NoSpace = 0x00001001,
  NvSciError_NoSuchDevAddr = 0x00001002,
  NvSciError_IO = 0x00001003,
  NvSciError_InvalidIoctlNum = 0x00001004,
  NvSciError_NoSuchEntry = 0x00001005,
  NvSciError_BadFileDesc = 0x00001006,
  NvSciError_CorruptedFileSys = 0x00001007,
  NvSciError_FileExists = 0x00001008,
  NvSciError_IsDirectory = 0x00001009,
  NvSciError_ReadOnlyFileSys = 0x0000100a,
  NvSciError_TextFileBusy = 0x0000100b,
  NvSciError_FileNameTooLong = 0x0000100c,
  NvSciError_FileTooBig = 0x0000100d,
  NvSciError_TooManySymbolLinks = 0x0000100e,
  NvSciError_TooManyOpenFiles = 0x0000100f,
  NvSciError_FileTableOverflow = 0x00001010,
  NvSciError_EndOfFile = 0x00001011,
  NvSciError_ConnectionReset = 0x00001012,
  NvSciError_AlreadyInProgress = 0x00001013,
  NvSciError_NoData = 0x00001014,
  NvSciError_NoDesiredMessage = 0x00001015,
  NvSciError_MessageSize = 0x00001016,
  NvSciError_ResourceBusy = 0x00001017,
  NvSciError_StreamBadLength = 0x00001018,
  NvSciError_NotADirectory = 0x00001019,
  /* NvSciBuf: reconciliation and attribute-list validation. */
  NvSciError_ReconciliationFailed = 0x00010100,
  NvSciError_AttrListValidationFailed = 0x00010101,
  /* NvSciSync: a fence that was cleared. */
  NvSciError_ClearedFence = 0x00010200
} NvSciError;

#ifdef __cplusplus
}
#endif
#endif /* INCLUDED_NVSCI_ERROR_H */
