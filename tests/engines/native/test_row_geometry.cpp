// How the row kernels split work (src/engines/native/row_geometry.cpp): pure arithmetic, checked
// on the CPU.
#include <gtest/gtest.h>

#include "engines/native/row_geometry.hpp"

namespace eagle::native {
namespace {

TEST(RowGeometry, VectorWidthIsSixteenBytesWhenTheRowIsAMultiple) {
  EXPECT_EQ(row_vec(4096, 2), 8);
  EXPECT_EQ(row_vec(4096, 4), 4);
  EXPECT_EQ(row_vec(4099, 4), 1);
  EXPECT_EQ(row_vec(12, 2), 1);  // 24 bytes: not a whole number of 16-byte packs
  EXPECT_EQ(row_vec(1, 4), 1);
}

TEST(RowGeometry, ShortRowsTakeAWarpEach) {
  const RowGeometry g = row_geometry(3, 5, 1, 132);
  EXPECT_EQ(g.group, 32);
  EXPECT_EQ(g.threads, 128);
  EXPECT_TRUE(g.cached);
  EXPECT_EQ(g.grid, 1u);                                  // 3 rows, 4 to a block
  EXPECT_EQ(row_geometry(1000, 1024, 8, 132).group, 32);  // 128 packs of 8
}

TEST(RowGeometry, LongRowsTakeABlockSizedForFourPacksAThread) {
  const RowGeometry g = row_geometry(16384, 4096, 8, 132);  // bf16 [16384, 4096]
  EXPECT_EQ(g.group, g.threads);
  EXPECT_EQ(g.threads, 128);
  EXPECT_TRUE(g.cached);
  EXPECT_EQ(g.grid, 132u * (kThreadsPerSm / 128));        // one full wave, rows strided over it
  const RowGeometry f = row_geometry(7, 131072, 4, 132);  // f32 rows past the registers
  EXPECT_EQ(f.threads, 1024);
  EXPECT_FALSE(f.cached);
  EXPECT_EQ(f.grid, 7u);
}

TEST(RowGeometry, EveryRowFitsTheCacheWhenCached) {
  for (int64_t len : {1, 5, 127, 128, 129, 512, 513, 1031, 4096, 4099, 16384, 16385, 100000})
    for (int vec : {1, 4, 8}) {
      const RowGeometry g = row_geometry(10, len, vec, 132);
      const int64_t packs = (len + vec - 1) / vec;
      EXPECT_EQ(g.cached, packs <= int64_t{g.group} * kCachedPacks) << len << " " << vec;
      EXPECT_EQ(g.threads % 32, 0);
      EXPECT_EQ(g.threads % g.group, 0);
      EXPECT_GE(g.grid, 1u);
    }
}

TEST(RowGeometry, NoRowsStillLaunchesAValidGrid) {
  EXPECT_EQ(row_geometry(0, 4096, 8, 132).grid, 1u);
  EXPECT_EQ(row_geometry(5, 0, 1, 0).grid, 2u);  // no SM count: still a grid for the rows
}

TEST(ReduceRowGeometry, RowsOfAtMostSixteenPacksALaneTakeAWarp) {
  const RowGeometry g = reduce_row_geometry(16384, 4096, 8, 132);  // bf16 [16384, 4096]
  EXPECT_EQ(g.group, 32);
  EXPECT_EQ(g.threads, kReduceThreads);
  EXPECT_EQ(g.grid, 132u * kReduceBlocksPerSm);  // every block resident, rows strided
  EXPECT_EQ(reduce_row_geometry(16384, 4096, 4, 132).group, kReduceThreads);  // f32: 32 a lane
  EXPECT_EQ(reduce_row_geometry(3, 5, 1, 132).group, 32);
  EXPECT_EQ(reduce_row_geometry(3, 5, 1, 132).grid, 1u);
}

TEST(ReduceRowGeometry, LongPiecesTakeTheBlockAndEmptyOnesStillLaunch) {
  const RowGeometry g = reduce_row_geometry(1056, 63552, 8, 132);  // all axes of 2^26, split
  EXPECT_EQ(g.group, kReduceThreads);
  EXPECT_EQ(g.grid, 132u * kReduceBlocksPerSm);
  EXPECT_EQ(reduce_row_geometry(6, 0, 1, 132).group, 32);
  EXPECT_EQ(reduce_row_geometry(6, 0, 1, 132).grid, 1u);
  EXPECT_EQ(reduce_row_geometry(0, 10, 1, 0).grid, 1u);
}

}  // namespace
}  // namespace eagle::native
