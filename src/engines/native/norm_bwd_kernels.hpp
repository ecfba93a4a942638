// Our CUDA layer_norm and rms_norm backward from dy, x and the forward's f32 statistics, over
// dense row-major [rows, len]: f32, f16 or bf16 (dy, x and scale of one dtype), f32 math.
//   dx = inv_std * (g - [mean(g) for layer_norm] - xhat * mean(g * xhat)), g = dy * scale,
// a row per group of threads. The row sums add in float within a thread and in double across
// threads (one barrier a row for both). dscale = sum over rows of dy * xhat and dbias = sum over
// rows of dy are column sums, deterministic (no atomics):
//   * rows in registers (at most kNormBwdCachedThreads threads a row): each group keeps the
//     next row's loads in flight while it reduces this one, sums its columns over its rows in
//     float registers and writes them once to its slot of the workspace; a second kernel adds
//     the slots up per column in slot order (in double, many slots in flight per column).
//   * longer rows: chunks of rows re-read dy and x per column into double partials, added up
//     in chunk order.
#pragma once

#include <cstddef>
#include <cstdint>

#include "eagle/core/dtype.hpp"
#include "engines/native/row_geometry.hpp"

namespace eagle::native {

struct NormBwdArgs {
  const void* dy;
  const void* x;
  const void* scale;     // null: none
  const float* mean;     // null for rms_norm
  const float* inv_std;  // inv_variance or inv_rms
  void* dx;
  void* dscale;     // null: not asked
  void* dbias;      // null: not asked
  void* workspace;  // norm_bwd_workspace bytes when dscale or dbias is asked
  int64_t rows, len;
  int64_t chunk_rows, chunks;  // the rows of the column sums' chunks
};
// The rows kernel and, when asked, the column sums. False on a launch error.
using NormBwdLauncher = bool (*)(const NormBwdArgs& args, const RowGeometry& g,
                                 void* stream) noexcept;
// The launcher for (dtype, g.vec, g.cached, whether dscale or dbias is asked), or nullptr.
NormBwdLauncher norm_bwd_launcher(DType dtype, const RowGeometry& g, bool params);

// Threads per block of the column-sum kernels of long rows (columns per block).
inline constexpr int kColumnThreads = 256;
// The slot sums' block: 32 adjacent columns by 32 lanes that each add every 32nd slot.
inline constexpr int kFinishColumns = 32, kFinishLanes = 32;
// The largest group of the cached rows kernel: a thread's registers hold two rows' packs of dy
// and x and, with parameter gradients, its columns' sums (over 128 registers in bf16), which
// 256 threads a block can have; longer rows stream.
inline constexpr int kNormBwdCachedThreads = 256;

// At most this many blocks per SM run a cached launch (one wave of what is resident, from the
// occupancy at launch): it bounds the slots, so the workspace, at build.
inline constexpr int kNormBwdBlocksPerSm = 8;

// The geometry of the norm backward: the rows' (row_geometry), streamed where a cached row
// would need more than kNormBwdCachedThreads threads; a cached grid at most one wave of
// kNormBwdBlocksPerSm blocks per SM.
inline RowGeometry norm_bwd_geometry(RowGeometry g, int multiprocessors) {
  if (g.cached && g.threads > kNormBwdCachedThreads) g.cached = false;
  if (g.cached) {
    const int64_t wave = int64_t{multiprocessors < 1 ? 1 : multiprocessors} * kNormBwdBlocksPerSm;
    if (int64_t{g.grid} > wave) g.grid = static_cast<unsigned>(wave);
  }
  return g;
}

// The slots of a cached run with parameter gradients: at most one per group of the plan's
// grid (the launch may run fewer blocks; the finish adds the slots it wrote).
inline int64_t norm_bwd_slots(const RowGeometry& g) {
  return int64_t{g.grid} * (g.threads / g.group);
}
// Workspace bytes for the column sums of (args, g) (when dscale or dbias is asked): float slots
// [2, slots, len] when the rows are cached, double chunks [2, chunks, len] otherwise.
inline std::size_t norm_bwd_workspace(const NormBwdArgs& a, const RowGeometry& g) {
  const int64_t cells = 2 * a.len * (g.cached ? norm_bwd_slots(g) : a.chunks);
  return static_cast<std::size_t>(cells) * (g.cached ? sizeof(float) : sizeof(double));
}

}  // namespace eagle::native
