// Our CUDA layer_norm and rms_norm backward from dy, x and the forward's f32 statistics, over
// dense row-major [rows, len]: f32, f16 or bf16 (dy, x and scale of one dtype), f32 math.
//   dx = inv_std * (g - [mean(g) for layer_norm] - xhat * mean(g * xhat)), g = dy * scale,
// a row per group of threads (registers when the row fits). dscale = sum over rows of
// dy * xhat and dbias = sum over rows of dy are column sums, deterministic (no atomics):
//   * rows in registers: each group of threads keeps its columns' sums over the rows it runs
//     in registers and writes them once to its slot of the workspace; one pass adds the slots
//     up in slot order. No second read of dy and x.
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

// Threads per block of the column-sum kernels (columns per block).
inline constexpr int kColumnThreads = 256;

// The slots of a cached run with parameter gradients: one per group of threads of the grid.
inline int64_t norm_bwd_slots(const RowGeometry& g) {
  return int64_t{g.grid} * (g.threads / g.group);
}
// Workspace bytes for the column sums of (args, g) (when dscale or dbias is asked): float slots
// [2, slots, len] when the rows are cached, double chunks [2, chunks, len] otherwise.
inline std::size_t norm_bwd_workspace(const NormBwdArgs& a, const RowGeometry& g) {
  const int64_t cells = 2 * a.len * (g.cached ? norm_bwd_slots(g) : a.chunks);
  return static_cast<std::size_t>(cells) * (g.cached ? sizeof(float) : sizeof(double));
}
// Blocks per SM of a cached run with parameter gradients: every slot writes a row of partials,
// so the grid is one wave of fewer, longer-lived blocks (each thread keeps 4 packs of dy and x
// in flight). Untimed default.
inline constexpr int kNormBwdBlocksPerSm = 2;

}  // namespace eagle::native
