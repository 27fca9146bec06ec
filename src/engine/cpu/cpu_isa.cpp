#include "cpu_isa.h"

#include <cstdlib>
#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "log.h"

namespace softdla::cpu {
namespace {

// AMX-TILE and AMX-INT8 (CPUID leaf 7, EDX bits 24 and 25), usable once Linux grants this process the
// tile data state (arch_prctl ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA; refused on older kernels and
// where the hypervisor hides AMX).
bool amx_usable() {
#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 25))) return false;
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

// AVX-VNNI: CPUID leaf 7 subleaf 1, EAX bit 4 (asked directly: clang's __builtin_cpu_supports has no
// "avxvnni"); its VEX registers are the AVX2 ones, whose OS support the caller checked.
bool has_avxvnni() {
#if defined(__x86_64__) && defined(__GNUC__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4)) != 0;
#else
  return false;
#endif
}

Isa detect() {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  // __builtin_cpu_supports also checks that the OS saves the wide registers (XCR0).
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vnni"))
    return amx_usable() ? Isa::kAmx : Isa::kAvx512Vnni;
  if (__builtin_cpu_supports("avx2") && has_avxvnni()) return Isa::kAvxVnni;
  if (__builtin_cpu_supports("avx2")) return Isa::kAvx2;
#endif
  return Isa::kPortable;
}

Isa choose() {
  const Isa best = detect();
  const char* env = std::getenv("SOFTDLA_CPU_ISA");
  if (!env || !*env || std::strcmp(env, "auto") == 0) return best;
  for (Isa isa : {Isa::kPortable, Isa::kAvx2, Isa::kAvxVnni, Isa::kAvx512Vnni, Isa::kAmx}) {
    if (std::strcmp(env, isa_name(isa)) != 0) continue;
    // Each path implies the ones below it on every CPU that has it, except avxvnni (a separate VEX feature).
    const bool runs = isa != Isa::kAvxVnni || best == Isa::kAvxVnni ||
                      (best > Isa::kAvxVnni && has_avxvnni());
    if (isa <= best && runs) return isa;
    log(LogLevel::kWarn, "SOFTDLA_CPU_ISA=", env, ": this CPU cannot run that path; using ", isa_name(best));
    return best;
  }
  log(LogLevel::kWarn, "SOFTDLA_CPU_ISA=", env,
      " is not one of auto, amx, avx512vnni, avxvnni, avx2, portable; using ", isa_name(best));
  return best;
}

}  // namespace

bool cpu_has_avx512_vbmi() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const bool has = __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512vnni") &&
                          __builtin_cpu_supports("avx512bw");
  return has;
#else
  return false;
#endif
}

bool cpu_has_amx_bf16() {
#if defined(__x86_64__) && defined(__GNUC__)
  // AMX-BF16: CPUID leaf 7, EDX bit 22.
  static const bool has = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d & (1u << 22)) != 0 && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl");
  }();
  return has;
#else
  return false;
#endif
}

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
    case Isa::kAmx: return "amx";
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
