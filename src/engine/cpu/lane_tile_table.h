// The dispatch of the output-channel lane tiles (conv_lanes_f32.h, gemm_lanes_s8.h): each defines tile
// instances for 1 to 8 columns (pixels) and 1 to 3 vectors of sixteen output channels, exposed as
// Tiles::fn<kP, kV>; lane_tile_for picks the one for a block's channels (up to 48) and a tile's columns.
#pragma once
#include <array>
#include <cstddef>
#include <utility>

namespace softdla::cpu {

template <class Tiles, size_t kV, size_t... kP>
constexpr auto lane_tile_row(std::index_sequence<kP...>) {
  return std::array{Tiles::template fn<kP + 1, kV>...};
}

template <class Tiles>
auto lane_tile_for(size_t channels, size_t cols) {
  static constexpr std::array table{lane_tile_row<Tiles, 1>(std::make_index_sequence<8>()),
                                    lane_tile_row<Tiles, 2>(std::make_index_sequence<8>()),
                                    lane_tile_row<Tiles, 3>(std::make_index_sequence<8>())};
  const size_t v = channels <= 16 ? 0 : channels <= 32 ? 1 : 2;
  return table[v][cols == 0 ? 0 : cols > 8 ? 7 : cols - 1];
}

}  // namespace softdla::cpu
