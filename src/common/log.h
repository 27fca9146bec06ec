// The one logging facility: SOFTDLA_LOG=none|error|warn|info|debug (default warn), lines to stderr as
// "softdla <level>: message".
#pragma once
#include <sstream>
#include <string>

namespace softdla {

enum class LogLevel { kError = 0, kWarn = 1, kInfo = 2, kDebug = 3 };

LogLevel log_threshold();
void log_line(LogLevel level, const std::string& message);

template <class... Parts>
void log(LogLevel level, const Parts&... parts) {
  if (level > log_threshold()) return;
  std::ostringstream os;
  (os << ... << parts);
  log_line(level, os.str());
}

}  // namespace softdla
