// The weight-panel stream the lane tiles drain into L2 (panel_stream.h): the parts units set cover a
// panel's lines exactly once, and tiles take them a line a reduction step, never past the part's end.
#include <gtest/gtest.h>

#include <cstddef>
#include <thread>
#include <vector>

#include "panel_stream.h"

using softdla::cpu::panel_stream;
using softdla::cpu::stream_panel_part;

TEST(PanelStream, PartsCoverThePanelOnce) {
  static const char panel[64 * 1000] = {};
  for (size_t lines : {1u, 7u, 48u, 999u, 1000u})
    for (size_t parts : {1u, 2u, 3u, 7u, 16u}) {
      std::vector<int> fetched(1000, 0);
      for (size_t part = 0; part < parts; ++part) {
        stream_panel_part(panel, 64 * lines, part, parts);
        for (size_t taken = 0;;) {
          size_t count = 0;
          const char* first = panel_stream().take(5, count);
          if (count == 0) break;
          EXPECT_LE(count, 5u);
          for (size_t i = 0; i < count; ++i) ++fetched[size_t(first - panel) / 64 + i];
          taken += count;
          ASSERT_LE(taken, lines);
        }
      }
      for (size_t i = 0; i < 1000; ++i)
        EXPECT_EQ(fetched[i], i < lines ? 1 : 0) << lines << " lines, " << parts << " parts, line " << i;
    }
}

TEST(PanelStream, AShortTileTakesOneLineAStep) {
  static const char panel[64 * 10] = {};
  stream_panel_part(panel, sizeof panel, 0, 1);
  size_t count = 0;
  EXPECT_EQ(panel_stream().take(4, count), panel);
  EXPECT_EQ(count, 4u);
  EXPECT_EQ(panel_stream().take(100, count), panel + 4 * 64);
  EXPECT_EQ(count, 6u);
  panel_stream().take(100, count);
  EXPECT_EQ(count, 0u);  // drained: later tiles fetch nothing
}

TEST(PanelStream, NullPanelEmptiesTheStream) {
  static const char panel[64 * 10] = {};
  stream_panel_part(panel, sizeof panel, 0, 1);
  stream_panel_part(nullptr, 0, 0, 1);
  size_t count = 1;
  panel_stream().take(8, count);
  EXPECT_EQ(count, 0u);
}

TEST(PanelStream, EachThreadHasItsOwn) {
  static const char panel[64 * 10] = {};
  stream_panel_part(panel, sizeof panel, 0, 1);
  size_t other = 1;
  std::thread([&] { panel_stream().take(8, other); }).join();
  EXPECT_EQ(other, 0u);  // a new thread's stream starts empty
  size_t mine = 0;
  panel_stream().take(8, mine);
  EXPECT_EQ(mine, 8u);
}

// The walk visits every (image, block) in order; each unit names the block of the unit after it.
TEST(PanelStream, NextBlockInWalkFollowsTheWalk) {
  using softdla::cpu::next_block_in_walk;
  for (size_t images : {1u, 2u, 5u})
    for (size_t blocks : {1u, 2u, 7u}) {
      const size_t units = images * blocks;
      for (size_t u = 0; u < units; ++u) {
        const size_t next = next_block_in_walk(u / blocks, u % blocks, images, blocks);
        if (u + 1 == units) EXPECT_EQ(next, blocks) << images << " x " << blocks;
        else EXPECT_EQ(next, (u + 1) % blocks) << images << " x " << blocks << " unit " << u;
      }
    }
}
