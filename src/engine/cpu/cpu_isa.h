// Which instruction set the CPU backend's INT8 kernels use, chosen once per process at run time:
// the best the CPU has, or the one SOFTDLA_CPU_ISA forces (auto | avx512vnni | avxvnni | avx2 |
// portable). Every path gives the same bytes; the switch exists so tests and benchmarks can run each.
#pragma once
#include <string>

namespace softdla::cpu {

enum class Isa {
  kPortable = 0,    // plain C++ (the compiler's baseline x86-64 or another architecture)
  kAvx2 = 1,        // int16 pair products (vpmaddwd)
  kAvxVnni = 2,     // 256-bit vpdpbusd (VEX encoding; Alder Lake and later, Zen 5)
  kAvx512Vnni = 3,  // 512-bit vpdpbusd (Cascade Lake and later, Zen 4 and later)
};

// The best path this CPU can run.
Isa detected_isa();
// The path in use: detected_isa(), or SOFTDLA_CPU_ISA's if the CPU can run it (a path it cannot run is
// logged once as a warning and the detected one is used).
Isa active_isa();
const char* isa_name(Isa isa);
// "avx512vnni (detected: avx512vnni)": what `softdla` tools print.
std::string describe_isa();

}  // namespace softdla::cpu
