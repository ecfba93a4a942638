// Device side of the ragged schedules for the varlen attention kernels: which (tile, head) a CTA
// runs, and the rows of the tile's sequence on both sides, clamped as ragged::chunk_task clamps.
#pragma once

#include <cstdint>

#include "eagle/ragged/schedule.hpp"
#include "engines/native/attention/varlen_kernels.hpp"

namespace eagle::native::attention {

// One task: tile `tile` of sequence `seq` (rows [row_begin, row_end) of the tiled side) for head
// `head` (a q head, or a kv head for kernels whose task is per kv head), plus the sequence's
// rows on both sides.
struct Task {
  int64_t seq = -1;
  int64_t tile = 0;
  int head = 0;
  int64_t row_begin = 0, row_end = 0;  // the tile's rows (tiled side)
  int64_t q_begin = 0, q_end = 0;      // the sequence's q rows
  int64_t kv_begin = 0, kv_end = 0;    // the sequence's kv rows
};

// The sequence's rows on one side, clamped to [0, rows] with end >= begin.
__device__ __forceinline__ void sequence_rows(const int32_t* cu, int64_t seq, int64_t rows,
                                              int64_t& begin, int64_t& end) {
  begin = ragged::clamp_row(cu[seq], 0, rows);
  end = ragged::clamp_row(cu[seq + 1], begin, rows);
}

// Tile j (0 <= j < active tiles) for head h as a Task; `q_side` says which side is tiled.
__device__ __forceinline__ Task make_task(const VarlenShape& s, const TaskGrid& g, int block,
                                          bool q_side, int64_t j, int head) {
  const int32_t* cu = q_side ? s.cu_q : s.cu_kv;
  const int64_t rows = q_side ? s.rows_q : s.rows_kv;
  const ragged::ChunkTask c = ragged::chunk_task(cu, g.tile_offsets, s.slots, rows, block, j);
  Task t;
  t.seq = c.sequence;
  t.head = head;
  if (t.seq < 0) return t;
  t.tile = j - g.tile_offsets[t.seq];
  t.row_begin = c.row_begin;
  t.row_end = c.row_end;
  sequence_rows(s.cu_q, t.seq, s.rows_q, t.q_begin, t.q_end);
  sequence_rows(s.cu_kv, t.seq, s.rows_kv, t.kv_begin, t.kv_end);
  return t;
}

// The active tiles of the batch (tile_offsets[N]), read once per CTA.
__device__ __forceinline__ int64_t active_tiles(const VarlenShape& s, const TaskGrid& g) {
  return g.tile_offsets[s.slots];
}

// Flat schedule: CTA (blockIdx.x, blockIdx.y) = (tile, head) of a grid (capacity_tiles, heads).
// Persistent schedule: worker w of W runs task indices w, w + W, ... < active tiles * heads,
// task index i = head * active + tile (the tiles of one head run together, so CTAs resident at
// once share that head's K and V in L2).
//   for (int64_t i = first_task(...); i < n; i += stride) { decode(i) ... }
__device__ __forceinline__ void decode_task(int64_t i, int64_t active, int64_t& tile, int& head) {
  head = static_cast<int>(i / active);
  tile = i - static_cast<int64_t>(head) * active;
}

// CTAs of a persistent launch: min(tasks at capacity, ctas_per_sm * SMs), at least 1.
inline int persistent_workers(const TaskGrid& g, int heads_per_grid, int ctas_per_sm) {
  const int64_t tasks = g.capacity_tiles * heads_per_grid;
  const int64_t resident =
      static_cast<int64_t>(ctas_per_sm) * (g.multiprocessors > 0 ? g.multiprocessors : 1);
  const int64_t w = tasks < resident ? tasks : resident;
  return static_cast<int>(w > 0 ? w : 1);
}

}  // namespace eagle::native::attention
