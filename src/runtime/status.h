// Every non-success status leaves one log line: "<function>: <what was wrong> -> <status name>".
#pragma once
#include "cudla.h"
#include "log.h"

namespace softdla::rt {

const char* status_name(cudlaStatus s);

template <class... Parts>
cudlaStatus fail_status(cudlaStatus s, const char* function, const Parts&... parts) {
  log(LogLevel::kError, function, ": ", parts..., " -> ", status_name(s));
  return s;
}

}  // namespace softdla::rt
