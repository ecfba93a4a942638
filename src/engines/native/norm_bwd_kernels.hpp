// Our CUDA layer_norm and rms_norm backward from dy, x and the forward's f32 statistics, over
// dense row-major [rows, len]: f32, f16 or bf16 (dy, x and scale of one dtype), f32 math.
//   dx = inv_std * (g - [mean(g) for layer_norm] - xhat * mean(g * xhat)), g = dy * scale,
// a row per group of threads. The row sums add in float within a thread and in double across
// threads (one barrier a row for both). dscale = sum over rows of dy * xhat and dbias = sum over
// rows of dy are column sums, deterministic (no atomics):
//   * aligned rows of a block (staged): each thread copies its packs of the next rows into
//     shared memory (cp.async, kNormBwdStages rows deep), so loads stay in flight while a row
//     is reduced and written; it sums its columns over its group's rows in float registers and
//     writes them once to its group's slot of the workspace; a second kernel adds the slots up
//     per column in slot order (in double, many slots in flight per column).
//   * other rows that fit the registers (unaligned, or short rows of a warp): the same, the
//     row's packs in registers instead of shared memory.
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
// The largest group of the register-cached rows kernel (unaligned rows, and rows of a warp): a
// thread's registers hold a row's packs of dy and x and, with parameter gradients, its columns'
// sums (over 128 registers in bf16), which 256 threads a block can have; longer rows stream.
inline constexpr int kNormBwdCachedThreads = 256;

// At most this many blocks per SM run a cached launch (one wave of what is resident, from the
// occupancy at launch): it bounds the slots, so the workspace, at build.
inline constexpr int kNormBwdBlocksPerSm = 8;

// The staged kernel (aligned rows of a block, 16-byte packs): each thread copies its own packs
// of dy and x for the rows ahead into shared memory with cp.async, kNormBwdStages rows deep, so
// the loads of the next rows stay in flight while this row is reduced and written; a thread
// owns kNormBwdStagedPacks packs of a row (its columns' sums stay in registers), so
// kNormBwdStagedThreads threads hold rows of up to 1024 packs.
inline constexpr int kNormBwdStages = 3, kNormBwdStagedPacks = 2, kNormBwdStagedThreads = 512;
// Shared memory of one staged block: the stages of dy's and x's packs, then the row sums'
// scratch (two buffers of 32 double pairs).
inline constexpr int kNormBwdScratchBytes = 2 * 32 * 16;
inline int norm_bwd_staged_smem(int threads) {
  return kNormBwdStages * 2 * kNormBwdStagedPacks * threads * 16 + kNormBwdScratchBytes;
}
// Shared memory an SM of the largest (sm_90) has for blocks, and what each block reserves: the
// bound on staged blocks per SM at build (the launch asks the device).
inline constexpr int kSmemPerSm = 228 * 1024, kSmemReservedPerBlock = 1024;

// Whether g is the staged kernel's geometry: 16-byte packs (vec > 1), a block per row.
inline bool norm_bwd_staged(const RowGeometry& g) {
  return g.cached && g.vec > 1 && g.group == g.threads && g.group > 32;
}

// The geometry of the norm backward from the rows' (row_geometry) and the row length: aligned
// rows of a block (more than 128 packs) staged, at most kNormBwdStagedPacks packs a thread
// (threads a multiple of 32, 64 to kNormBwdStagedThreads); other cached rows in registers up to
// kNormBwdCachedThreads threads; longer rows stream. A cached grid is at most one wave of
// kNormBwdBlocksPerSm blocks per SM (fewer when the staged blocks' shared memory says so).
inline RowGeometry norm_bwd_geometry(RowGeometry g, int64_t len, int multiprocessors) {
  int per_sm = kNormBwdBlocksPerSm;
  if (g.cached && g.vec > 1 && g.group == g.threads) {
    const int64_t packs = (len + g.vec - 1) / g.vec;
    const int64_t want = (packs + kNormBwdStagedPacks - 1) / kNormBwdStagedPacks;
    const int64_t threads = want < 64 ? 64 : (want + 31) / 32 * 32;
    if (threads <= kNormBwdStagedThreads) {
      g.threads = g.group = static_cast<int>(threads);
      const int fit = kSmemPerSm / (norm_bwd_staged_smem(g.threads) + kSmemReservedPerBlock);
      per_sm = fit < 1 ? 1 : fit < per_sm ? fit : per_sm;
    } else {
      g.cached = false;
    }
  } else if (g.cached && g.threads > kNormBwdCachedThreads) {
    g.cached = false;
  }
  if (g.cached) {
    const int64_t wave = int64_t{multiprocessors < 1 ? 1 : multiprocessors} * per_sm;
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
