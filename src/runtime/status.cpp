#include "status.h"

#include "softdla/cudla_status_name.h"

namespace softdla::rt {

const char* status_name(cudlaStatus s) { return softdlaStatusName(s); }

}  // namespace softdla::rt
