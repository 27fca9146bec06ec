// Software prefetches for reads the hardware prefetchers miss. Loads under masks (the strided and
// padded row readers of the pools, the stride-2 packs) train none of Zen 5's prefetchers: a stride-2
// max pool over 12.8 MB in memory read at under 5 GB/s of the core's 40, and ran 4x faster once its
// rows were fetched ahead (pool.cpp). The kernels that read that way fetch their next rows here.
#pragma once
#include <cstddef>
#include <cstdint>

namespace softdla::cpu {

// Output rows ahead whose input rows the strided row readers fetch (im2col_walk's stride-2 runs in
// conv.cpp, ImplicitConvF32's stride-2 pack): ResNet-50's stride-2 1x1 downsample at batch 8 on one
// Zen 5 thread, INT8 2.30-2.45 -> 2.03-2.21 ms, FP16 8.3 -> 6.7-7.0 ms.
constexpr size_t kStridedRowsAhead = 4;

// Every 64-byte line of the `bytes` bytes at `offset` bytes from `base`. Integer arithmetic: the lines
// ahead may lie past the tensor (a prefetch never faults, but the pointer sum would be undefined).
inline void prefetch_lines(const void* base, std::ptrdiff_t offset, size_t bytes) {
  const uintptr_t first = reinterpret_cast<uintptr_t>(base) + uintptr_t(offset);
  for (uintptr_t a = first; a < first + bytes; a += 64) __builtin_prefetch(reinterpret_cast<const void*>(a));
}

}  // namespace softdla::cpu
