#include "amx_tiles.h"

#include <cstdint>

#include "x86_simd.h"

namespace softdla::cpu {

#ifdef SOFTDLA_X86
namespace {

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

__attribute__((target("amx-tile"))) void configure_tiles() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) cfg.colsb[t] = 64, cfg.rows[t] = 16;
  // GCC does not see ldtilecfg's intrinsic read the structure and drops the stores above (the tiles then
  // get whatever the stack held): a compiler barrier keeps them.
  asm volatile("" : : "r"(&cfg) : "memory");
  _tile_loadconfig(&cfg);
}

__attribute__((target("amx-tile"))) void release_tiles() { _tile_release(); }

}  // namespace

TileScope::TileScope() { configure_tiles(); }
TileScope::~TileScope() { release_tiles(); }
#else
TileScope::TileScope() {}
TileScope::~TileScope() {}
#endif

}  // namespace softdla::cpu
