// The run-time switches that force a choice between CPU kernels (SOFTDLA_AMX_F16, SOFTDLA_DW_F16,
// SOFTDLA_F16_GATHER): which of a switch's values the environment holds, read once per process.
#pragma once
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>

#include "log.h"

namespace softdla::cpu {

// The index of `variable`'s value among `values`; 0 (values' first, the default) where it is unset or
// empty, and with a warning where it is none of them.
inline size_t kernel_switch(const char* variable, std::initializer_list<const char*> values) {
  const char* env = std::getenv(variable);
  if (!env || !*env) return 0;
  size_t i = 0;
  std::string listed;
  for (const char* v : values) {
    if (std::strcmp(env, v) == 0) return i;
    listed += (i++ ? ", " : "") + std::string(v);
  }
  log(LogLevel::kWarn, variable, "=", env, " is not one of ", listed, "; using ", *values.begin());
  return 0;
}

}  // namespace softdla::cpu
