// The weight panel a thread's next work unit reads, fetched into L2 while the current unit's tiles compute.
//
// The lane tiles (conv_lanes_f32.h) read a whole panel of a block's weights per tile: [steps][48] floats,
// 192 bytes a reduction step, up to 442 KB (a 3x3 layer over 256 channels). A block's first tile finds its
// panel in memory or L3 (at batch 1 every layer's weights were evicted by the layers between), and the
// hardware prefetchers, which stop at each 4 KB page, leave that tile waiting on its loads; the other
// tiles find the panel in L2. A unit therefore names the panel the thread reads next (or its share of it,
// where several units read the same panel in turn), and each tile it runs fetches one line of that panel
// per reduction step (prefetcht1: into L2, not L1, which holds the current panel's lines), so the next
// block starts with its panel in L2. ResNet-50 FP16 at batch 1 on two threads of the AVX-512 FMA path:
// 0.93-0.96x the time (one thread 0.95-0.98x); INT8 on the VNNI lane tiles 0.95-0.97x.
//
// The drains: the lane tiles (conv_lanes_f32.h, gemm_lanes_s8.h) and the AVX-512 FP32 GEMM's two-panel
// tile (gemm.cpp), whose Winograd caller streams the next GEMM's weight rows the same way. A loop that
// sets the stream holds a PanelStreamScope, so no stream outlives the weights it points into.
#pragma once
#include <algorithm>
#include <cstddef>

namespace softdla::cpu {

// A stream moves in cache lines: a tile fetches one a reduction step.
inline constexpr size_t kStreamLineBytes = 64;

struct PanelStream {
  const char* next = nullptr;  // the first line not fetched yet
  size_t lines = 0;            // lines left to fetch

  // The lines a tile of `steps` reduction steps fetches (one a step), taken off the stream: their first
  // at the returned pointer, their count in `count`.
  const char* take(size_t steps, size_t& count) {
    count = std::min(steps, lines);
    const char* first = next;
    next += kStreamLineBytes * count, lines -= count;
    return first;
  }
};

// The calling thread's stream: work units set it, the lane tiles drain it.
inline PanelStream& panel_stream() {
  static thread_local PanelStream stream;
  return stream;
}

// Part `part` of `parts` of the `bytes` bytes at `panel` (whole lines) as the calling thread's
// stream; a null panel empties it.
inline void stream_panel_part(const void* panel, size_t bytes, size_t part, size_t parts) {
  PanelStream& s = panel_stream();
  if (!panel) {
    s = {};
    return;
  }
  const size_t lines = bytes / kStreamLineBytes, from = lines * part / parts, to = lines * (part + 1) / parts;
  s = {static_cast<const char*>(panel) + kStreamLineBytes * from, to - from};
}

// In a walk over `images` images of `blocks` weight blocks each (blocks inner), the block the unit after
// one of (image, block) reads: the next block, the next image's first after the last; `blocks` (none)
// after the walk's last unit.
inline size_t next_block_in_walk(size_t image, size_t block, size_t images, size_t blocks) {
  return image + 1 == images && block + 1 == blocks ? blocks : (block + 1) % blocks;
}

// Empties the calling thread's stream when it ends: a unit loop's, so that no later tile fetches lines
// of weights that may be gone by then.
struct PanelStreamScope {
  PanelStreamScope() = default;
  PanelStreamScope(const PanelStreamScope&) = delete;
  PanelStreamScope& operator=(const PanelStreamScope&) = delete;
  ~PanelStreamScope() { panel_stream() = {}; }
};

}  // namespace softdla::cpu
