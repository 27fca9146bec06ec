/* The name of a cudlaStatus value as written in cudla.h ("cudlaErrorInvalidParam"), for messages; the
 * runtime's log lines and the softdla command use it. A value cudla.h does not name gives
 * "cudlaStatus(?)". */
#ifndef SOFTDLA_CUDLA_STATUS_NAME_H
#define SOFTDLA_CUDLA_STATUS_NAME_H
#include "../cudla.h"

static inline const char* softdlaStatusName(cudlaStatus s) {
  switch (s) {
    case cudlaSuccess: return "cudlaSuccess";
    case cudlaErrorInvalidParam: return "cudlaErrorInvalidParam";
    case cudlaErrorOutOfResources: return "cudlaErrorOutOfResources";
    case cudlaErrorCreationFailed: return "cudlaErrorCreationFailed";
    case cudlaErrorInvalidAddress: return "cudlaErrorInvalidAddress";
    case cudlaErrorOs: return "cudlaErrorOs";
    case cudlaErrorCuda: return "cudlaErrorCuda";
    case cudlaErrorUmd: return "cudlaErrorUmd";
    case cudlaErrorInvalidDevice: return "cudlaErrorInvalidDevice";
    case cudlaErrorInvalidAttribute: return "cudlaErrorInvalidAttribute";
    case cudlaErrorIncompatibleDlaSWVersion: return "cudlaErrorIncompatibleDlaSWVersion";
    case cudlaErrorMemoryRegistered: return "cudlaErrorMemoryRegistered";
    case cudlaErrorInvalidModule: return "cudlaErrorInvalidModule";
    case cudlaErrorUnsupportedOperation: return "cudlaErrorUnsupportedOperation";
    case cudlaErrorNvSci: return "cudlaErrorNvSci";
    case cudlaErrorDriverNotFound: return "cudlaErrorDriverNotFound";
    case cudlaErrorDlaErrInvalidInput: return "cudlaErrorDlaErrInvalidInput";
    case cudlaErrorDlaErrInvalidPreAction: return "cudlaErrorDlaErrInvalidPreAction";
    case cudlaErrorDlaErrNoMem: return "cudlaErrorDlaErrNoMem";
    case cudlaErrorDlaErrProcessorBusy: return "cudlaErrorDlaErrProcessorBusy";
    case cudlaErrorDlaErrTaskStatusMismatch: return "cudlaErrorDlaErrTaskStatusMismatch";
    case cudlaErrorDlaErrEngineTimeout: return "cudlaErrorDlaErrEngineTimeout";
    case cudlaErrorDlaErrDataMismatch: return "cudlaErrorDlaErrDataMismatch";
    case cudlaErrorUnknown: return "cudlaErrorUnknown";
  }
  return "cudlaStatus(?)";
}

#endif
