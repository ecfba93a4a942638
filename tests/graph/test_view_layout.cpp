// views_tile: when views of one buffer cover it exactly (the reverse pass then writes a packed
// gradient's slices without zero-filling the array first).
#include <gtest/gtest.h>

#include "graph/view_layout.hpp"

namespace eagle::detail {
namespace {

// A view of a [rows, cols] f32 buffer's columns [c0, c0 + n): rows of n elements, cols apart.
NodeArgInfo columns(int64_t rows, int64_t cols, int64_t c0, int64_t n) {
  const int64_t item = 4;
  return {"",        Access::write, 0,        c0 * item, ((rows - 1) * cols + n) * item,
          {rows, n}, DType::f32,    {cols, 1}};
}

TEST(ViewsTile, ColumnSlicesCoveringTheArrayTileIt) {
  const int64_t bytes = 6 * 24 * 4;
  EXPECT_TRUE(
      views_tile({columns(6, 24, 0, 8), columns(6, 24, 8, 8), columns(6, 24, 16, 8)}, bytes));
  // Order does not matter; unequal widths are fine.
  EXPECT_TRUE(views_tile({columns(6, 24, 20, 4), columns(6, 24, 0, 20)}, bytes));
}

TEST(ViewsTile, AGapOverlapOrAliasIsNotATiling) {
  const int64_t bytes = 6 * 24 * 4;
  // Columns 16..23 written by no view.
  EXPECT_FALSE(views_tile({columns(6, 24, 0, 8), columns(6, 24, 8, 8)}, bytes));
  // Columns 4..7 twice: the bytes add up, yet 20..23 are left out.
  EXPECT_FALSE(
      views_tile({columns(6, 24, 0, 8), columns(6, 24, 4, 8), columns(6, 24, 12, 12)}, bytes));
  // A broadcast (stride 0) view names one element many times.
  NodeArgInfo broadcast = columns(6, 24, 0, 24);
  broadcast.strides = {0, 1};
  broadcast.bytes = 24 * 4;
  EXPECT_FALSE(views_tile({broadcast, columns(6, 24, 0, 24)}, bytes));
  // Past the buffer's end.
  EXPECT_FALSE(views_tile({columns(6, 24, 0, 24)}, bytes - 4));
}

TEST(ViewsTile, TheWholeContiguousArrayTilesIt) {
  const NodeArgInfo whole{"", Access::write, 0, 0, 64, {4, 4}, DType::f32, {}};
  EXPECT_TRUE(views_tile({whole}, 64));
  EXPECT_FALSE(views_tile({}, 64));
}

}  // namespace
}  // namespace eagle::detail
