#include "log.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace softdla {

LogLevel log_threshold() {
  static const LogLevel level = [] {
    const char* env = std::getenv("SOFTDLA_LOG");
    if (!env) return LogLevel::kWarn;
    if (!std::strcmp(env, "none")) return LogLevel(-1);
    if (!std::strcmp(env, "error")) return LogLevel::kError;
    if (!std::strcmp(env, "info")) return LogLevel::kInfo;
    if (!std::strcmp(env, "debug")) return LogLevel::kDebug;
    return LogLevel::kWarn;
  }();
  return level;
}

void log_line(LogLevel level, const std::string& message) {
  static const char* const names[] = {"error", "warn", "info", "debug"};
  static std::mutex mutex;  // keep lines from different threads whole
  std::lock_guard<std::mutex> lock(mutex);
  std::fprintf(stderr, "softdla %s: %s\n", names[int(level)], message.c_str());
}

}  // namespace softdla
