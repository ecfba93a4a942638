// Our CUDA embedding backward, deterministic (no float atomics): dtable[v] = the sum of the rows
// of dy whose id is v, added in the order of the ids, as the reference adds them.
//
// Why this shape: a float atomicAdd per (id, column) is fast but its sum depends on the order
// the hardware serves the atomics in. Instead the positions are first sorted by id, stably, by a
// two-level counting sort in four small kernels, none of them a single block over the vocab:
//   1. the ids are cut into `chunks` runs of positions; a block per chunk counts its ids per
//      bucket of `bucket_ids` consecutive ids (shared-memory integer atomics: counts do not
//      depend on their order) and writes its column of the [buckets, chunks] count matrix;
//   2. one block scans that matrix bucket-major (buckets * chunks entries, a few thousand);
//   3. a block per chunk walks its positions in order with one warp, 32 a step, and places each
//      in its bucket (__match_any_sync ranks equal buckets inside the warp, a cursor per bucket in
//      shared memory carries the order across steps): positions grouped by bucket, in position
//      order inside each bucket;
//   4. a block per bucket counts its ids, scans them into the segment offsets of its ids (so
//      every offset is written by exactly one block) and places its positions by id the same
//      way: positions sorted by id, in position order inside each id.
// Then a warp per table row writes the row once with 16-byte stores: zeros when no id names it,
// a copy of its one dy row, or the sum of its segment's dy rows in position order in double.
//
// An id outside [0, V) contributes nothing (the reference refuses such a call; a refusal would
// need the ids on the host); nothing is read or written outside the buffers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "eagle/core/dtype.hpp"
#include "engines/native/row_geometry.hpp"

namespace eagle::native {

// The sort's shape, from (vocab, rows) alone (host and device agree on it).
struct EmbeddingSortShape {
  int64_t bucket_ids;  // consecutive ids a bucket holds (a bucket block's cursors in shared)
  int64_t buckets;     // ceil(vocab / bucket_ids), at most kMaxBuckets
  int64_t chunks;      // runs of positions; buckets * chunks counts are scanned by one block
  int64_t chunk;       // positions a chunk holds (the last may hold fewer)
};
// Most buckets (their cursors: 32 KB of shared memory) and ids a bucket (32 KB): vocabularies up
// to 2^26 ids.
inline constexpr int64_t kEmbeddingMaxBuckets = 8192;
inline constexpr int64_t kEmbeddingMaxBucketIds = 8192;
inline constexpr int64_t kEmbeddingMaxVocab = kEmbeddingMaxBuckets * kEmbeddingMaxBucketIds;

inline EmbeddingSortShape embedding_sort_shape(int64_t vocab, int64_t rows) {
  EmbeddingSortShape s{};
  s.bucket_ids = 256;
  while (s.bucket_ids * kEmbeddingMaxBuckets < vocab) s.bucket_ids *= 2;
  s.buckets = vocab < 1 ? 1 : (vocab + s.bucket_ids - 1) / s.bucket_ids;
  // About 1024 positions a chunk (32 warp steps), the count matrix kept to 2^18 entries.
  int64_t chunks = (rows + 1023) / 1024;
  const int64_t most = (int64_t{1} << 18) / s.buckets;
  if (chunks > most) chunks = most;
  if (chunks < 1) chunks = 1;
  s.chunk = (rows + chunks - 1) / chunks;
  if (s.chunk < 1) s.chunk = 1;
  s.chunks = chunks;
  return s;
}

struct EmbeddingBwdArgs {
  const void* dy;    // [rows, dim]
  const void* ids;   // [rows]
  void* dtable;      // [vocab, dim]
  int32_t* scratch;  // the workspace: embedding_bwd_workspace(vocab, rows) bytes
  int64_t rows, vocab, dim;
};
// Offsets [vocab + 1], positions sorted by id [rows], positions sorted by bucket [rows], the
// bucket x chunk counts and their scan [buckets * chunks + 1] each, as int32.
inline std::size_t embedding_bwd_workspace(int64_t vocab, int64_t rows) {
  const EmbeddingSortShape s = embedding_sort_shape(vocab, rows);
  const int64_t cells = s.buckets * s.chunks;
  return static_cast<std::size_t>(vocab + 1 + 2 * rows + 2 * cells + 1) * sizeof(int32_t);
}
using EmbeddingBwdLauncher = bool (*)(const EmbeddingBwdArgs& args, const RowGeometry& g,
                                      void* stream) noexcept;
// The launcher for (dy dtype, ids dtype, g.vec); g is a geometry over vocab rows of dim (only
// its vec is used: the kernels size their own grids).
EmbeddingBwdLauncher embedding_bwd_launcher(DType dtype, DType ids, const RowGeometry& g);

}  // namespace eagle::native
