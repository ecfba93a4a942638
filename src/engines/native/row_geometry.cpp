#include "engines/native/row_geometry.hpp"

#include <algorithm>

namespace eagle::native {

int row_vec(int64_t len, int elem_bytes) {
  const int vec = 16 / elem_bytes;
  return len % vec == 0 ? vec : 1;
}

RowGeometry row_geometry(int64_t rows, int64_t len, int vec, int multiprocessors) {
  RowGeometry g;
  g.vec = vec;
  const int64_t packs = (len + vec - 1) / vec;
  if (packs <= 32 * 4) {
    g.group = 32;
    g.threads = 128;
    g.cached = true;
  } else {
    const int64_t want = (packs + 3) / 4;
    g.threads = static_cast<int>(std::clamp<int64_t>((want + 31) / 32 * 32, 64, 1024));
    g.group = g.threads;
    g.cached = packs <= int64_t{g.threads} * kCachedPacks;
  }
  const int64_t rows_per_block = g.threads / g.group;
  const int64_t blocks = std::max<int64_t>(1, (rows + rows_per_block - 1) / rows_per_block);
  const int64_t resident =
      int64_t{std::max(1, multiprocessors)} * std::max(1, kThreadsPerSm / g.threads);
  g.grid = static_cast<unsigned>(std::min(blocks, resident));
  return g;
}

RowGeometry reduce_row_geometry(int64_t pieces, int64_t len, int vec, int multiprocessors) {
  RowGeometry g;
  g.vec = vec;
  g.threads = kReduceThreads;
  g.cached = false;
  const int64_t packs = (len + vec - 1) / vec;
  g.group = packs <= int64_t{32} * kReduceWarpPacks ? 32 : kReduceThreads;
  const int64_t per_block = g.threads / g.group;
  const int64_t blocks = std::max<int64_t>(1, (pieces + per_block - 1) / per_block);
  g.grid = static_cast<unsigned>(
      std::min(blocks, int64_t{std::max(1, multiprocessors)} * kReduceBlocksPerSm));
  return g;
}

}  // namespace eagle::native
