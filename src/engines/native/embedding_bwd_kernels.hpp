// Our CUDA embedding backward, deterministic (no float atomics): dtable[v] = the sum of the rows
// of dy whose id is v, added in the order of the ids, as the reference adds them.
//
// Why this shape: a float atomicAdd per (id, column) is fast but its sum depends on the order
// the hardware serves the atomics in. Instead the positions are first sorted by id, stably: one
// block counts the ids (integer atomics: counts do not depend on order) and scans the counts
// into segment offsets; then each block of a grid over the vocabulary (8192 ids each, their
// cursors in shared memory) walks all ids in order with one warp, 32 a step, and places those
// in its range (__match_any_sync ranks equal ids inside the warp). Then a group of threads per
// table row sums its segment's dy rows in position order in double registers and writes the
// row once (zeros for ids that never occur). The walk is N / 32 dependent steps of shared-memory
// latency per block, all blocks at once (untimed): the part to parallelise further if a
// measurement says so. One group of threads sums a row's whole segment, so a very skewed
// distribution (one id for most positions, e.g. padding) is summed by one SM: splitting long
// segments into chunks combined in order is the fix when that case matters.
//
// An id outside [0, V) contributes nothing (the reference refuses such a call; a refusal would
// need the ids on the host); nothing is read or written outside the buffers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "eagle/core/dtype.hpp"
#include "engines/native/row_geometry.hpp"

namespace eagle::native {

struct EmbeddingBwdArgs {
  const void* dy;    // [rows, dim]
  const void* ids;   // [rows]
  void* dtable;      // [vocab, dim]
  int32_t* scratch;  // the workspace: embedding_bwd_workspace(vocab, rows) bytes
  int64_t rows, vocab, dim;
};
// Offsets [vocab + 1], counts [vocab] and the sorted positions [rows], as int32.
inline std::size_t embedding_bwd_workspace(int64_t vocab, int64_t rows) {
  return static_cast<std::size_t>(2 * vocab + 1 + rows) * sizeof(int32_t);
}
using EmbeddingBwdLauncher = bool (*)(const EmbeddingBwdArgs& args, const RowGeometry& g,
                                      void* stream) noexcept;
// The launcher for (dy dtype, ids dtype, g.vec); g is a geometry over vocab rows of dim.
EmbeddingBwdLauncher embedding_bwd_launcher(DType dtype, DType ids, const RowGeometry& g);

}  // namespace eagle::native
