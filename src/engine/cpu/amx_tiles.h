// AMX tile configuration for the tile kernels (conv_implicit.cpp, conv_amx_f16.cpp): all 8 tiles as 16
// rows x 64 bytes. Loading a configuration and releasing the tiles cost hundreds of cycles, more than a
// small work unit's products, so a TileScope covers a chunk of units (one thread's share of an op).
//
// The tile kernels share one shape: C tiles 0-3 hold a 32 x 32 block of 4-byte sums (tile i/2 of rows,
// tile i%2 of columns), A tiles 4-5 its two row halves, B tiles 6-7 its two column halves.
#pragma once
#include <cstddef>
#include <cstdint>

#include "x86_simd.h"

namespace softdla::cpu {

#ifdef SOFTDLA_X86
__attribute__((target("amx-tile"), always_inline)) inline void zero_block_tiles() {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
}

// The block into row-major memory of 4-byte elements, rows `ld` bytes apart.
__attribute__((target("amx-tile"), always_inline)) inline void store_block_tiles(void* out, size_t ld) {
  auto* p = static_cast<uint8_t*>(out);
  _tile_stored(0, p, ld);
  _tile_stored(1, p + 64, ld);
  _tile_stored(2, p + 16 * ld, ld);
  _tile_stored(3, p + 16 * ld + 64, ld);
}
#endif

// The block's four products with the tile product instruction `dp` (a _tile_dp* macro): C(i, j) += A(i) B(j).
#define SOFTDLA_TILE_BLOCK_PRODUCTS(dp) \
  do {                                  \
    dp(0, 4, 6);                        \
    dp(1, 4, 7);                        \
    dp(2, 5, 6);                        \
    dp(3, 5, 7);                        \
  } while (0)

class TileScope {
 public:
  TileScope();   // configures this thread's tiles (the CPU must have AMX and the tile permission)
  ~TileScope();  // releases them
  TileScope(const TileScope&) = delete;
  TileScope& operator=(const TileScope&) = delete;
};

}  // namespace softdla::cpu
