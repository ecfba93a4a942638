// Our CUDA cross_entropy forward: logits [rows, classes] (f32, f16, bf16; f32 math), integer
// targets [rows] (i32, i64). One read of the logits per row by one warp (an online max and
// rescaled sum, one rescale per few packs, sums in float within a step and in double across
// steps and lanes; and the plain sum label smoothing needs). Few rows split into chunks, a warp
// each, combined per row in chunk order. Reductions are deterministic: per-row losses land in a
// buffer and one block sums them in a fixed order in double, no atomics.
//
// A target outside [0, classes) other than ignore_index gives that row a NaN loss (and so a NaN
// sum or mean): the reference refuses such a call, but a refusal would need the targets on the
// host; the kernel never reads outside the row.
#pragma once

#include <cstdint>

#include "eagle/core/dtype.hpp"
#include "engines/native/row_geometry.hpp"

namespace eagle::native {

struct CrossEntropyArgs {
  const void* logits;
  const void* targets;
  float* row_loss;  // [rows]: the output (reduction none) or the workspace
  float* lse;       // [rows] or null
  int64_t rows, classes, ignore_index;
  float label_smoothing;
  // Few rows (split_cross_entropy_launcher): each row in `splits` chunks of `chunk` classes, a
  // warp each, their (max, sum of exp, sum) in `partials` [rows * splits * 3]; a thread per row
  // then combines them in chunk order. Unused otherwise.
  int64_t splits = 1, chunk = 0;
  double* partials = nullptr;
};
using CrossEntropyLauncher = bool (*)(const CrossEntropyArgs& args, const RowGeometry& g,
                                      void* stream) noexcept;

// The forward's blocks: kCeThreads threads, a warp per row or chunk, at least kCeBlocksPerSm
// resident per SM (the kernel's launch bounds), so a grid of one wave follows from the SM count.
inline constexpr int kCeThreads = 256, kCeBlocksPerSm = 4;
// The shortest chunk of a split row: 4 steps of a warp's 16-byte loads in bf16.
inline constexpr int64_t kCeSplitChunk = 1024;

// The forward's geometry (g.vec, g.grid; the rest unused) and a's splits and chunk: rows fewer
// than half the resident warps split into chunks (whole 16-element multiples, at least
// kCeSplitChunk classes) so about a wave of warps runs; the grid is at most one wave.
inline RowGeometry cross_entropy_geometry(CrossEntropyArgs& a, int vec, int multiprocessors) {
  const int64_t sms = multiprocessors < 1 ? 1 : multiprocessors;
  const int64_t warps_per_block = kCeThreads / 32, wave = sms * kCeBlocksPerSm * warps_per_block;
  a.splits = 1;
  a.chunk = 0;
  if (a.rows > 0 && a.rows < wave / 2 && a.classes >= 2 * kCeSplitChunk) {
    const int64_t most = (a.classes + kCeSplitChunk - 1) / kCeSplitChunk;
    const int64_t want = (wave + a.rows - 1) / a.rows;
    a.splits = most < want ? most : want;
    a.chunk = ((a.classes + a.splits - 1) / a.splits + 15) / 16 * 16;
    a.splits = (a.classes + a.chunk - 1) / a.chunk;
  }
  RowGeometry g;
  g.vec = vec;
  g.group = 32;
  g.threads = kCeThreads;
  const int64_t blocks = (a.rows * a.splits + warps_per_block - 1) / warps_per_block;
  const int64_t grid = blocks < sms * kCeBlocksPerSm ? blocks : sms * kCeBlocksPerSm;
  g.grid = static_cast<unsigned>(grid < 1 ? 1 : grid);
  return g;
}
// The split launcher for (logits dtype, targets dtype, g.vec) (cross_entropy_geometry's).
CrossEntropyLauncher split_cross_entropy_launcher(DType logits, DType targets,
                                                  const RowGeometry& g);
// The per-row launcher for (logits dtype, targets dtype, g.vec), or nullptr.
CrossEntropyLauncher cross_entropy_launcher(DType logits, DType targets, const RowGeometry& g);

// Sums row_loss[rows] into *loss (mean: over the rows whose target is not ignore_index; NaN when
// there are none), in one block. False on a launch error.
bool launch_loss_total(const float* row_loss, const void* targets, DType targets_dtype,
                       int64_t rows, int64_t ignore_index, bool mean, float* loss,
                       void* stream) noexcept;

// The backward: dlogits = w * (softmax(logits) - (1 - ls) * onehot(target) - ls / C), w =
// dloss[r] (none), dloss (sum) or dloss / the rows not ignored (mean; counted first by one
// block into `counted`). Ignored rows get 0, a target outside the classes a NaN row. The
// forward's lse is used when given, else each row computes it (one more read of the row).
struct CrossEntropyBwdArgs {
  const void* logits;
  const void* targets;
  const float* dloss;
  const float* lse;  // null: computed
  void* dlogits;
  int64_t* counted;  // the workspace (reduction mean)
  int64_t rows, classes, ignore_index;
  float label_smoothing;
  int reduction;  // 0 none, 1 sum, 2 mean
  // With the forward's lse, few long rows go as `splits` chunks of `chunk` classes, a group of
  // threads each (nothing to combine: each element needs only its row's lse). 1: whole rows.
  int64_t splits = 1, chunk = 0;
};
using CrossEntropyBwdLauncher = bool (*)(const CrossEntropyBwdArgs& args, const RowGeometry& g,
                                         void* stream) noexcept;
CrossEntropyBwdLauncher cross_entropy_bwd_launcher(DType logits, DType targets,
                                                   const RowGeometry& g);

// count_not_equal: *y = the number of x[0..n) (i32 or i64) unequal to `value`, as y_dtype (f32
// or f64), by one block. False on a launch error.
bool launch_count_not_equal(const void* x, DType x_dtype, int64_t n, int64_t value, void* y,
                            DType y_dtype, void* stream) noexcept;

}  // namespace eagle::native
