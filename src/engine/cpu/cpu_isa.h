// Which instruction set the CPU backend's kernels use, chosen once per process at run time: the best
// the CPU has, or the one SOFTDLA_CPU_ISA forces (auto | amx | avx512vnni | avxvnni | avx2 | portable). It
// picks the INT8 kernels (amx: the im2col-path convolution GEMM on AMX tiles, the rest as avx512vnni;
// on both, depthwise convolutions use vpdpbusd with VBMI byte permutes where the CPU has AVX512-VBMI),
// and also the FP32 GEMM of FP16/FP32 convolutions (gemm.h: AVX-512F tiles on avx512vnni and amx,
// AVX2+FMA on avx2 and avxvnni, plain C++ with std::fma on portable) and the bulk fp16 conversions
// (half_convert.h). INT8 bytes are the same on every path, and the FP32 GEMM gives every output the same
// sequence of fused multiply-adds on every path; the switch exists so tests and benchmarks can run each.
#pragma once
#include <string>

namespace softdla::cpu {

enum class Isa {
  kPortable = 0,    // plain C++ (the compiler's baseline x86-64 or another architecture)
  kAvx2 = 1,        // int16 pair products (vpmaddwd)
  kAvxVnni = 2,     // 256-bit vpdpbusd (VEX encoding; Alder Lake and later, Zen 5)
  kAvx512Vnni = 3,  // 512-bit vpdpbusd (Cascade Lake and later, Zen 4 and later)
  kAmx = 4,         // AMX-INT8 tiles (tdpbsud; Sapphire Rapids and later), with AVX-512 VNNI elsewhere
};

// Whether a path runs AVX-512 code (every path from avx512vnni up does).
inline bool has_avx512(Isa isa) { return isa >= Isa::kAvx512Vnni; }

// The best path this CPU can run.
Isa detected_isa();
// The path in use: detected_isa(), or SOFTDLA_CPU_ISA's if the CPU can run it (a path it cannot run is
// logged once as a warning and the detected one is used).
Isa active_isa();
const char* isa_name(Isa isa);
// "avx512vnni (detected: avx512vnni)": what `softdla` tools print.
std::string describe_isa();

// Extensions some kernels of the AVX-512 paths use where the CPU has them (asked once per process):
// VBMI byte permutes with AVX-512 BW and VNNI (the INT8 depthwise kernel), and AMX-BF16 with AVX-512
// BW and VL (the FP16 tile convolutions; the tile permission is the amx path's).
bool cpu_has_avx512_vbmi();
bool cpu_has_amx_bf16();

}  // namespace softdla::cpu
