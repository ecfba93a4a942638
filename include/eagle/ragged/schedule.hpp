// Where a ragged kernel's task finds its work: chunk j of a batch (0 <= j < chunk_offsets[N]) is
// rows [row_begin, row_end) of sequence `sequence`, found on the device from cu_seqlens and
// chunk_offsets (ragged::chunk_offsets) by one binary search. Usable in host and device code.
//
// The two schedules a ragged kernel launches, both sized by chunk_capacity(T, N, C) and never by
// a max_seqlen:
//   flat        grid = chunk_capacity; task j runs chunk j, tasks past chunk_offsets[N] return
//   persistent  grid = W = min(chunk_capacity, resident CTAs); worker w runs chunks w, w + W, ...
//               below chunk_offsets[N] (no atomics: the stride fixes who runs what)
#pragma once

#include <cstdint>

#include "eagle/core/hd.hpp"

namespace eagle::ragged {

// v clamped to [lo, hi] (lo <= hi): how every ragged kernel reads a row index it did not make.
EAGLE_HD int64_t clamp_row(int64_t v, int64_t lo, int64_t hi) {
  return v < lo ? lo : (v > hi ? hi : v);
}

// The chunk offsets of a batch (ragged::chunk_offsets, eagle/ragged/kernels.hpp): offsets[s] is
// the exclusive scan of ceil(len / C) over the lengths read with the clamped, non-decreasing
// boundaries b[s] = min(max(cu_seqlens[s], b[s - 1]), T), b[0] = 0. One thread, N + 1 entries:
// what the chunk_offsets kernel and every ragged engine's own offsets launch run.
EAGLE_HD void scan_chunk_offsets(const int32_t* cu_seqlens, int64_t slots, int64_t tokens,
                                 int64_t chunk, int32_t* offsets) {
  int64_t b = 0, total = 0;
  offsets[0] = 0;
  for (int64_t s = 1; s <= slots; ++s) {
    const int64_t end = clamp_row(cu_seqlens[s], b, tokens);
    total += (end - b + chunk - 1) / chunk;
    offsets[s] = static_cast<int32_t>(total);
    b = end;
  }
}

struct ChunkTask {
  int64_t sequence = -1;  // the slot s, or -1 past the batch's chunks
  int64_t row_begin = 0;  // the chunk's rows [row_begin, row_end), within the sequence's rows
  int64_t row_end = 0;
};

// The sequence owning chunk j: upper_bound(offsets[0..slots], j) - 1. Empty sequences own no
// chunk (equal neighbouring offsets), so they are skipped. Requires 0 <= j < offsets[slots].
EAGLE_HD int64_t sequence_of_chunk(const int32_t* offsets, int64_t slots, int64_t j) {
  int64_t lo = 0, hi = slots + 1;  // the first index whose offset exceeds j lies in [lo, hi)
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (offsets[mid] <= j)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo - 1;
}

// Chunk j's task from the device arrays of one batch (cu_seqlens and chunk_offsets, N + 1 i32
// each), the capacity T and the chunk size C, in O(log N). Past the batch's chunks the task's
// sequence is -1. The rows are always within [0, T): with valid metadata they are the chunk's
// rows; with metadata validate_cu_seqlens flags they are some rows in bounds (possibly none).
EAGLE_HD ChunkTask chunk_task(const int32_t* cu_seqlens, const int32_t* offsets, int64_t slots,
                              int64_t tokens, int64_t chunk, int64_t j) {
  ChunkTask t;
  if (j < 0 || j >= offsets[slots]) return t;
  const int64_t s = sequence_of_chunk(offsets, slots, j);
  const int64_t begin = clamp_row(cu_seqlens[s], 0, tokens);
  const int64_t end = clamp_row(cu_seqlens[s + 1], begin, tokens);
  t.sequence = s;
  t.row_begin = clamp_row(begin + (j - offsets[s]) * chunk, begin, end);
  t.row_end = clamp_row(t.row_begin + chunk, t.row_begin, end);
  return t;
}

}  // namespace eagle::ragged
