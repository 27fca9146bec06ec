// The AMX-BF16 tile products' rate on this core, for the operand layouts the FP16 tile kernels can use
// (src/engine/cpu/conv_amx_f16.cpp): the 2 x 2 block of C tiles, two A and two B tiles a step, and the
// second half of each step reloading two tiles (the lo pairs), as the kernels do.
//   build/bench/amx_tile_rate            (prints GFLOP/s of bf16 tile work per layout; needs AMX-BF16)
// Layouts, each a 3 x 3 convolution's 9 taps over 8 blocks of 16 channels, 108 units of 32 x 32 outputs:
//   contiguous    every tile 1 KB contiguous, at the same addresses (the instruction's ceiling)
//   channel rows  the reloaded tiles' rows one plane apart, shifted 4 bytes a tap (straddling lines)
//   pixel rows    the reloaded tiles 16 consecutive 64-byte pixel rows, shifted whole rows a tap
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace {

constexpr size_t kTileDwords = 256;
constexpr long kArchReqXcompPerm = 0x1023;
constexpr int kXfeatureTileData = 18;

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

struct Layout {
  const char* name;
  size_t row_bytes;       // bytes between the reloaded tiles' rows
  size_t tap_dwords[9];   // where each tap's reloaded tiles start
  size_t second_dwords;   // the second reloaded tile, after the first
};

__attribute__((target("amx-tile,amx-bf16"), noinline)) void unit(const uint32_t* fixed, const uint32_t* moving,
                                                                  const Layout& l, float* sums) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (size_t block = 0; block < 8; ++block)
    for (size_t t = 0; t < 9; ++t) {
      const uint32_t* m = moving + block * 16384 + l.tap_dwords[t];
      _tile_loadd(4, fixed, 64);
      _tile_loadd(5, fixed + kTileDwords, 64);
      _tile_loadd(6, m, l.row_bytes);
      _tile_loadd(7, m + l.second_dwords, l.row_bytes);
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
      _tile_loadd(6, m + 8192, l.row_bytes);
      _tile_loadd(7, m + 8192 + l.second_dwords, l.row_bytes);
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  _tile_stored(0, sums, 128);
  _tile_stored(1, sums + 16, 128);
  _tile_stored(2, sums + 512, 128);
  _tile_stored(3, sums + 528, 128);
}

__attribute__((target("amx-tile"))) void configure() {
  TileConfig cfg;
  for (int t = 0; t < 8; ++t) cfg.colsb[t] = 64, cfg.rows[t] = 16;
  asm volatile("" : : "r"(&cfg) : "memory");  // GCC does not see ldtilecfg read cfg (amx_tiles.cpp)
  _tile_loadconfig(&cfg);
}

__attribute__((target("amx-tile"))) void release() { _tile_release(); }

}  // namespace

int main() {
  if (!__builtin_cpu_supports("amx-bf16") || syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureTileData) != 0) {
    std::puts("amx_tile_rate: this CPU (or kernel) has no AMX-BF16 tiles");
    return 0;
  }
  std::vector<uint32_t> storage(8 * 16384 + 2 * 8192 + 64, 0x3f803f80u);  // bf16 pairs of 1.0
  uint32_t* data = storage.data() + (64 - reinterpret_cast<uintptr_t>(storage.data()) / 4 % 16) % 16;  // 64-byte aligned
  alignas(64) static float sums[32 * 32];
  const size_t wq = 30, plane = 28 * 30 + 64;  // a 28 x 28 output grid, 30 wide with its padding
  Layout layouts[3] = {{"contiguous", 64, {}, kTileDwords},
                       {"channel rows", plane * 4, {}, 16},
                       {"pixel rows", 64, {}, kTileDwords}};
  for (size_t r = 0; r < 3; ++r)
    for (size_t s = 0; s < 3; ++s) {
      layouts[1].tap_dwords[r * 3 + s] = r * wq + s;          // one dword a pixel
      layouts[2].tap_dwords[r * 3 + s] = (r * wq + s) * 16;   // one 64-byte row a pixel
    }
  configure();
  for (const Layout& l : layouts) {
    double best = 0;
    for (int rep = 0; rep < 5; ++rep) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int u = 0; u < 108 * 20; ++u) unit(data, data, l, sums);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = std::max(best, 108 * 20 * 8 * 9 * 8 * (16.0 * 16 * 32 * 2) / s / 1e9);
    }
    std::printf("%-13s %6.0f GFLOP/s of bf16 tile products (best of 5)\n", l.name, best);
  }
  release();
  return 0;
}
#else
int main() {
  std::puts("amx_tile_rate: x86-64 only");
  return 0;
}
#endif
