// Our CUDA reduction (sum, mean, max, min, prod, l2, amax) of f32, f16 or bf16 data, rounded
// once to the output dtype; the mode is a template parameter of every kernel. A thread folds a
// few packs in float (exact for max, min, amax; a few roundings for sums) and adds them once
// into a double, and threads combine in double: sums of millions of mixed-sign values keep the
// float64 reference's digits. Prod and l2 fold each element in double (a float product or
// square can leave float's range where the reference's does not). Max and min propagate NaN.
//   * rows: the reduced axes are the trailing ones of dense row-major x, [rows, len] -> [rows].
//     A warp or block per row, four 16-byte packs in flight a thread; few long rows (all axes
//     reduced) are split into chunks whose partials a second launch combines in a fixed order.
//   * columns: x is [outer, count, inner] with the middle axis reduced, [outer, inner] out (an
//     axis-0 reduction, or a middle one). Threads run along the contiguous inner axis with
//     16-byte loads, a block's rows of threads split its chunk of `count`, a fixed tree in
//     shared memory combines them; chunks' partials are combined in chunk order by a second
//     launch.
//   * strided: any other set of axes. A thread per output (per chunk of its reduced elements
//     when there are few outputs) walks them through the collapsed dims (at most 4 kept and 4
//     reduced runs): correct everywhere.
#pragma once

#include <cstdint>
#include <string_view>

#include "eagle/core/dtype.hpp"
#include "engines/native/row_geometry.hpp"

namespace eagle::native {

enum class ReduceMode : int32_t { sum, mean, max, min, prod, l2, amax };
// The mode named `name`; false for none of them.
inline bool reduce_mode_of(std::string_view name, ReduceMode& mode) {
  constexpr std::string_view names[] = {"sum", "mean", "max", "min", "prod", "l2", "amax"};
  for (int i = 0; i < 7; ++i)
    if (name == names[i]) {
      mode = static_cast<ReduceMode>(i);
      return true;
    }
  return false;
}

struct RowReduceArgs {
  const void* x;
  void* y;           // [rows]
  double* partials;  // [rows * splits] when splits > 1 (the workspace), else unused
  int64_t rows, len;
  int64_t chunk;   // elements per split (a multiple of the vector width)
  int64_t splits;  // chunks per row
  ReduceMode mode;
};
using RowReduceLauncher = bool (*)(const RowReduceArgs& args, const RowGeometry& g,
                                   void* stream) noexcept;
// The launcher for (dtype, g.vec), or nullptr. `g` is a reduce_row_geometry over rows * splits
// pieces of `chunk` elements; a second launch combines the partials when splits > 1.
RowReduceLauncher row_reduce_launcher(DType dtype, const RowGeometry& g);

// The column kernel's work: x is [outer, count, inner] (row-major), y [outer, inner]. A block
// is tile_x threads along inner (a pack of `vec` elements each) by tile_y along count.
struct ColumnReduceArgs {
  const void* x;
  void* y;
  double* partials;  // [splits, outer * inner] when splits > 1 (the workspace), else unused
  int64_t outer, count, inner;
  int64_t splits, chunk;  // count split into `splits` chunks of `chunk` rows
  int tile_x, tile_y;     // tile_x * tile_y == kReduceThreads, both powers of two
  ReduceMode mode;
};
using ColumnReduceLauncher = bool (*)(const ColumnReduceArgs& args, unsigned grid,
                                      void* stream) noexcept;
// The launcher for (dtype, vec: 16 bytes' worth or 1), or nullptr.
ColumnReduceLauncher column_reduce_launcher(DType dtype, int vec);

inline constexpr int kMaxRuns = 4;
struct StridedReduceArgs {
  const void* x;
  void* y;                 // [outputs], row-major over the kept runs
  int64_t outputs, count;  // outputs, and reduced elements per output
  int kept_runs, reduced_runs;
  int64_t kept_size[kMaxRuns], kept_stride[kMaxRuns];  // outermost first, strides in elements
  int64_t reduced_size[kMaxRuns], reduced_stride[kMaxRuns];
  ReduceMode mode;
  // Few outputs: each output's reduced elements split into `splits` chunks of `chunk`, one
  // thread each, their double partials [splits, outputs] in the workspace combined in split
  // order by a second launch.
  int64_t splits, chunk;
  double* partials;
};
using StridedReduceLauncher = bool (*)(const StridedReduceArgs& args, unsigned grid,
                                       unsigned threads, void* stream) noexcept;
StridedReduceLauncher strided_reduce_launcher(DType dtype);

}  // namespace eagle::native
