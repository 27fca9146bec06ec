// AMX tile configuration for the tile kernels (conv_implicit.cpp, conv_amx_f16.cpp): all 8 tiles as 16
// rows x 64 bytes. Loading a configuration and releasing the tiles cost hundreds of cycles, more than a
// small work unit's products, so a TileScope covers a chunk of units (one thread's share of an op).
#pragma once

namespace softdla::cpu {

class TileScope {
 public:
  TileScope();   // configures this thread's tiles (the CPU must have AMX and the tile permission)
  ~TileScope();  // releases them
  TileScope(const TileScope&) = delete;
  TileScope& operator=(const TileScope&) = delete;
};

}  // namespace softdla::cpu
