#include "fault_injection.h"

#include <cstdlib>
#include <mutex>
#include <sstream>
#include <string_view>

#include "log.h"

namespace softdla::rt {
namespace {

struct NamedStatus {
  const char* name;
  cudlaStatus status;
};
constexpr NamedStatus kDlaErrors[] = {
    {"InvalidInput", cudlaErrorDlaErrInvalidInput},
    {"InvalidPreAction", cudlaErrorDlaErrInvalidPreAction},
    {"NoMem", cudlaErrorDlaErrNoMem},
    {"ProcessorBusy", cudlaErrorDlaErrProcessorBusy},
    {"TaskStatusMismatch", cudlaErrorDlaErrTaskStatusMismatch},
    {"EngineTimeout", cudlaErrorDlaErrEngineTimeout},
    {"DataMismatch", cudlaErrorDlaErrDataMismatch},
};

// Through a stream: GCC 12's -Wrestrict misfires on std::string operator+ here.
template <class... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

std::optional<uint64_t> parse_number(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 0);
  if (*end != '\0' || s[0] == '-') return std::nullopt;
  return uint64_t(v);
}

}  // namespace

std::optional<InjectedFault> parse_fault(const std::string& text, std::string& why) {
  InjectedFault f;
  const size_t at = text.find('@');
  const std::string name = text.substr(0, at);
  constexpr std::string_view kPrefix = "cudlaErrorDlaErr";
  const std::string_view bare = name.starts_with(kPrefix) ? std::string_view(name).substr(kPrefix.size()) : name;
  for (const NamedStatus& n : kDlaErrors)
    if (bare == n.name) f.status = n.status;
  if (f.status == cudlaSuccess)
    if (const auto v = parse_number(name))
      for (const NamedStatus& n : kDlaErrors)
        if (*v == uint64_t(n.status)) f.status = n.status;
  if (f.status == cudlaSuccess) {
    why = concat("'", name,
                 "' is not a cudlaErrorDlaErr* status (InvalidInput, InvalidPreAction, NoMem, ProcessorBusy, "
                 "TaskStatusMismatch, EngineTimeout, DataMismatch or its number)");
    return std::nullopt;
  }
  if (at != std::string::npos) {
    const std::string task = text.substr(at + 1);
    f.task = parse_number(task);
    if (!f.task) {
      why = concat("'", task, "' after '@' is not a task number");
      return std::nullopt;
    }
  }
  return f;
}

cudlaStatus injected_fault_for(uint64_t task) {
  const char* env = std::getenv("SOFTDLA_FAULT");
  if (!env || !*env) return cudlaSuccess;
  std::string why;
  const auto fault = parse_fault(env, why);
  if (!fault) {
    static std::once_flag logged;
    std::call_once(logged, [&] { log(LogLevel::kWarn, "SOFTDLA_FAULT=", env, " ignored: ", why); });
    return cudlaSuccess;
  }
  return !fault->task || *fault->task == task ? fault->status : cudlaSuccess;
}

}  // namespace softdla::rt
