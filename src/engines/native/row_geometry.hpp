// How the row kernels split their work, decided at build from the row length, the element size
// and the device's SM count (pure host arithmetic, so a plan for a descriptor has it too).
#pragma once

#include <cstdint>

namespace eagle::native {

// Packs a thread keeps in registers when its row fits them (the kernels' cache depth).
inline constexpr int kCachedPacks = 4;
// Threads resident per SM on sm_80..sm_90 (the grid holds at most this many per SM).
inline constexpr int kThreadsPerSm = 2048;

struct RowGeometry {
  int vec = 1;         // elements per access: 16 bytes' worth when the rows are aligned, else 1
  int group = 32;      // threads per row: one warp, or the whole block
  int threads = 128;   // per block
  unsigned grid = 1;   // blocks: enough to fill the device once, rows strided over them
  bool cached = true;  // the row fits the group's registers (one read of x), else it streams
};

// Short rows (at most 4 packs a lane) get a warp each, four rows to a 128-thread block; longer
// rows get a block sized for about four packs a thread (64 to 1024 threads), cached in registers
// when kCachedPacks packs a thread hold the row. Untimed defaults (the usual shapes of such
// kernels); a measured rule replaces them.
RowGeometry row_geometry(int64_t rows, int64_t len, int vec, int multiprocessors);

// The vector width (elements) for rows of `len` elements of `elem_bytes`: 16 bytes' worth when
// len is a multiple of it, else 1. The pointers' alignment is checked per call.
int row_vec(int64_t len, int elem_bytes);

// The reduction kernels' blocks: kReduceThreads threads, launch-bounded so that at least
// kReduceBlocksPerSm fit an SM; their grids hold that many per SM, every block resident.
inline constexpr int kReduceThreads = 256;
inline constexpr int kReduceBlocksPerSm = 4;

// A reduction over `pieces` pieces of `len` elements: a warp per piece while a lane holds at most
// kReduceWarpPacks packs of it (no block barrier per piece), else the block; kReduceThreads a
// block, a grid of at most kReduceBlocksPerSm blocks an SM, pieces strided over it.
inline constexpr int kReduceWarpPacks = 16;
RowGeometry reduce_row_geometry(int64_t pieces, int64_t len, int vec, int multiprocessors);

}  // namespace eagle::native
