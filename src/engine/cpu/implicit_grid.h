// The implicit GEMMs' (conv_implicit.h, conv_implicit_f32.h) output grid: rows as wide as a padded
// input plane, of which each row's first OW pixels are outputs and the rest are computed and dropped.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "thread_pool.h"

namespace softdla::cpu {

// Output pixels a lane-tile work unit takes (the INT8 and FP16 gathered lane tiles): whole tiles of
// `tile` pixels, at most about `most`, in at least `parts` parts where the pixels allow.
inline size_t lane_unit_pixels(size_t pixels, size_t parts, size_t tile, size_t most) {
  const size_t tiles = (pixels + tile - 1) / tile;
  const size_t units = std::max((pixels + most - 1) / most, std::min(parts, tiles));
  return ((pixels + units - 1) / units + tile - 1) / tile * tile;
}

// Hands `epilogue(k, hw0, sums, count)` the output runs of a block: row r of `sums` (row stride
// `stride`) holds channel row0 + r at grid pixels [pix0, pix0 + pixels) of a grid `wq` pixels wide
// whose rows' first `ow` pixels are outputs; hw0 is the run's output index (oh * ow + column). Runs
// whose outputs follow one another (the end of one output row and the start of the next) are moved
// together in `sums` and handed over as one: a 7- or 14-wide layer's epilogue then runs on whole
// blocks instead of on rows of 7 or 14 values, each paying the call's set-up.
template <class T, class Epilogue>
void emit_grid_runs(T* sums, size_t stride, size_t rows, size_t row0, size_t pix0, size_t pixels, size_t wq,
                    size_t ow, const Epilogue& epilogue) {
  for (size_t r = 0; r < rows; ++r) {
    T* s = sums + r * stride;
    T* merged = nullptr;  // the pending run: where its values start in s, its output index and length
    size_t start = 0, count = 0;
    for (size_t p = 0; p < pixels;) {
      const size_t gp = pix0 + p, row = gp / wq, col = gp % wq;
      const size_t run = std::min(pixels - p, wq - col);
      if (col < ow) {
        const size_t n = std::min(run, ow - col), hw0 = row * ow + col;
        if (count && hw0 == start + count) {  // continues the pending run: move it up behind it
          std::memmove(merged + count, s + p, n * sizeof(T));
          count += n;
        } else {
          if (count) epilogue(uint32_t(row0 + r), start, merged, count);
          merged = s + p, start = hw0, count = n;
        }
      }
      p += run;
    }
    if (count) epilogue(uint32_t(row0 + r), start, merged, count);
  }
}

// A block's output run: `count` outputs from grid position p of the block, at output index hw0.
struct GridRun {
  uint32_t p, count;
  size_t hw0;
};

// The output runs of grid pixels [pix0, pix0 + pixels) (as emit_grid_runs finds them, runs contiguous in
// the grid and in the output merged), into runs (room for `pixels`); returns how many.
inline size_t grid_runs(size_t pix0, size_t pixels, size_t wq, size_t ow, GridRun* runs) {
  size_t n = 0;
  for (size_t p = 0; p < pixels;) {
    const size_t gp = pix0 + p, row = gp / wq, col = gp % wq, run = std::min(pixels - p, wq - col);
    if (col < ow) {
      const size_t count = std::min(run, ow - col), hw0 = row * ow + col;
      if (n && runs[n - 1].hw0 + runs[n - 1].count == hw0 && runs[n - 1].p + runs[n - 1].count == p)
        runs[n - 1].count += uint32_t(count);  // contiguous in the grid and in the output
      else runs[n++] = {uint32_t(p), uint32_t(count), hw0};
    }
    p += run;
  }
  return n;
}

// Calls fn(n, u0, u1) for the parts of the batch-wide range [b, e) of units, `per_image` units an image,
// that fall in each image n (u0, u1 counted within the image): a pool chunk over every image's units.
template <class Fn>
void for_each_image_part(size_t b, size_t e, size_t per_image, const Fn& fn) {
  for (size_t u = b; u < e;) {
    const size_t n = u / per_image, end = std::min(e, (n + 1) * per_image);
    fn(n, u - n * per_image, end - n * per_image);
    u = end;
  }
}

// A batch as groups of images whose packed input, bytes_per_image each, stays within 512 KiB (L2-sized
// on the CPUs with these paths, leaving room for the weights and the blocks' sums): the scratch stays
// that size whatever the batch, every block reads its group from L2, and small images (the 14 x 14 and
// 7 x 7 layers, whose weights outgrow L2) all fit one group, so a batch reads the weights once.
// image_group gives the group size (the caller's scratch holds that many images). For each group,
// for_each_image_group calls pack(n, slot, u0, u1) on the pool for units [u0, u1) of image n (slot: its
// place in the group; units_per_image an image, at least min_units a chunk), then run(n0, count) for the
// group's images [n0, n0 + count).
inline size_t image_group(size_t bytes_per_image, size_t images) {
  constexpr size_t kGroupBytes = size_t(512) << 10;
  return std::clamp<size_t>(kGroupBytes / std::max<size_t>(bytes_per_image, 1), 1, std::max<size_t>(images, 1));
}

// Consecutive pixel blocks of one image that a work unit takes: as many as `fits` (its scratch), but few
// enough that `images` images of `blocks` blocks still give each of `threads` threads `per_thread` units.
// Each row block then runs over the whole span, so an output plane is written a span's lines in a row.
struct BlockSpans {
  size_t span, per_image;  // blocks a span, spans an image (the last one may be short)
};
inline BlockSpans block_spans(size_t blocks, size_t images, size_t fits, size_t per_thread, size_t threads) {
  const size_t spread = std::max<size_t>(1, images * blocks / (per_thread * threads));
  const size_t span = std::max<size_t>(1, std::min({fits, spread, blocks}));
  return {span, (blocks + span - 1) / span};
}

template <class Pack, class Run>
void for_each_image_group(ThreadPool& pool, size_t images, size_t group, size_t units_per_image, size_t min_units,
                          const Pack& pack, const Run& run) {
  for (size_t n0 = 0; n0 < images; n0 += group) {
    const size_t count = std::min(group, images - n0);
    pool.parallel_for(count * units_per_image, [&](size_t b, size_t e) {
      for_each_image_part(b, e, units_per_image,
                          [&](size_t slot, size_t u0, size_t u1) { pack(n0 + slot, slot, u0, u1); });
    }, min_units);
    run(n0, count);
  }
}

}  // namespace softdla::cpu
