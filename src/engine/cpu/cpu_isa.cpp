#include "cpu_isa.h"

#include <cstdlib>
#include <cstring>

#include "log.h"

namespace softdla::cpu {
namespace {

Isa detect() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  // __builtin_cpu_supports also checks that the OS saves the wide registers (XCR0).
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vnni"))
    return Isa::kAvx512Vnni;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("avxvnni")) return Isa::kAvxVnni;
  if (__builtin_cpu_supports("avx2")) return Isa::kAvx2;
#endif
  return Isa::kPortable;
}

Isa choose() {
  const Isa best = detect();
  const char* env = std::getenv("SOFTDLA_CPU_ISA");
  if (!env || !*env || std::strcmp(env, "auto") == 0) return best;
  for (Isa isa : {Isa::kPortable, Isa::kAvx2, Isa::kAvxVnni, Isa::kAvx512Vnni}) {
    if (std::strcmp(env, isa_name(isa)) != 0) continue;
    // avx512vnni implies the rest on every CPU that has it, except avxvnni (a separate VEX feature).
    const bool runs = isa == best || isa < Isa::kAvxVnni || (isa == Isa::kAvxVnni && best == Isa::kAvxVnni) ||
                      (isa == Isa::kAvxVnni && best == Isa::kAvx512Vnni && __builtin_cpu_supports("avxvnni"));
    if (isa <= best && runs) return isa;
    log(LogLevel::kWarn, "SOFTDLA_CPU_ISA=", env, ": this CPU cannot run that path; using ", isa_name(best));
    return best;
  }
  log(LogLevel::kWarn, "SOFTDLA_CPU_ISA=", env,
      " is not one of auto, avx512vnni, avxvnni, avx2, portable; using ", isa_name(best));
  return best;
}

}  // namespace

Isa detected_isa() {
  static const Isa isa = detect();
  return isa;
}

Isa active_isa() {
  static const Isa isa = choose();
  return isa;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kAvx512Vnni: return "avx512vnni";
    case Isa::kAvxVnni: return "avxvnni";
    case Isa::kAvx2: return "avx2";
    case Isa::kPortable: break;
  }
  return "portable";
}

std::string describe_isa() {
  return std::string(isa_name(active_isa())) + " (detected: " + isa_name(detected_isa()) + ")";
}

}  // namespace softdla::cpu
