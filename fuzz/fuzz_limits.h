// Shared settings of the fuzz targets: size caps that keep one execution short (a legal but huge model
// is not a defect) and an environment that keeps logs and threads out of the way.
#pragma once
#include <cstdint>
#include <cstdlib>

namespace softdla::fuzz {

inline constexpr uint64_t kMaxIoBytes = 16ull << 20;  // a task's I/O above this is loaded but not run
inline constexpr uint32_t kMaxBindings = 64;
// Multiply-adds (or element visits) of one task above which it is loaded but not run: a legal model
// with a large batch takes seconds under ASan+UBSan, which libFuzzer would report as a hang.
inline constexpr uint64_t kMaxTaskWork = uint64_t(1) << 26;

inline void quiet_environment() {
  setenv("SOFTDLA_LOG", "none", 0);
  setenv("SOFTDLA_THREADS", "1", 0);   // one worker: deterministic and sanitizer-friendly
  setenv("SOFTDLA_BACKEND", "cpu", 0);  // the CPU engine is what every backend is checked against
}

}  // namespace softdla::fuzz
