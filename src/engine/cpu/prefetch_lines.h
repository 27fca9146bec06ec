// Software prefetches for reads the hardware prefetchers miss. Loads under masks (the strided and
// padded row readers of the pools, the stride-2 packs) train none of Zen 5's prefetchers: a stride-2
// max pool over 12.8 MB in memory read at under 5 GB/s of the core's 40, and ran 4x faster once its
// rows were fetched ahead (pool.cpp). The kernels that read that way fetch their next rows here.
#pragma once
#include <cstddef>
#include <cstdint>

namespace softdla::cpu {

// Every 64-byte line of the `bytes` bytes at `offset` bytes from `base`. Integer arithmetic: the lines
// ahead may lie past the tensor (a prefetch never faults, but the pointer sum would be undefined).
inline void prefetch_lines(const void* base, std::ptrdiff_t offset, size_t bytes) {
  const uintptr_t first = reinterpret_cast<uintptr_t>(base) + uintptr_t(offset);
  for (uintptr_t a = first; a < first + bytes; a += 64) __builtin_prefetch(reinterpret_cast<const void*>(a));
}

}  // namespace softdla::cpu
