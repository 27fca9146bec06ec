// The implicit GEMMs' (conv_implicit.h, conv_implicit_f32.h) output grid: rows as wide as a padded
// input plane, of which each row's first OW pixels are outputs and the rest are computed and dropped.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace softdla::cpu {

// Hands `epilogue(k, hw0, sums, count)` the output runs of a block: row r of `sums` (row stride
// `stride`) holds channel row0 + r at grid pixels [pix0, pix0 + pixels) of a grid `wq` pixels wide
// whose rows' first `ow` pixels are outputs; hw0 is the run's output index (oh * ow + column).
template <class T, class Epilogue>
void emit_grid_runs(T* sums, size_t stride, size_t rows, size_t row0, size_t pix0, size_t pixels, size_t wq,
                    size_t ow, const Epilogue& epilogue) {
  for (size_t r = 0; r < rows; ++r) {
    T* s = sums + r * stride;
    for (size_t p = 0; p < pixels;) {
      const size_t gp = pix0 + p, row = gp / wq, col = gp % wq;
      const size_t run = std::min(pixels - p, wq - col);
      if (col < ow) epilogue(uint32_t(row0 + r), row * ow + col, s + p, std::min(run, ow - col));
      p += run;
    }
  }
}

}  // namespace softdla::cpu
