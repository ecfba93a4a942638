// Our CUDA reduction (sum, mean, max, min, prod, l2, amax) of f32, f16 or bf16 data, computed
// in double (sums of thousands of mixed-sign values keep the reference's digits) and rounded
// once to the output dtype. Max and min propagate NaN, as the reference does.
//   * rows: the reduced axes are the trailing ones of dense row-major x, [rows, len] -> [rows].
//     A group of threads per row, 16-byte loads; few long rows (all axes reduced) are split
//     into chunks whose partial results a second launch combines in a fixed order.
//   * strided: any other set of axes. A thread per output (per chunk of its reduced elements
//     when there are few outputs) walks them through the collapsed dims (at most 4 kept and 4
//     reduced runs): correct everywhere, coalesced when the kept axes are the inner ones.
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
// The launcher for (dtype, g.vec), or nullptr. `g` is a geometry over rows * splits pieces of
// `chunk` elements.
RowReduceLauncher row_reduce_launcher(DType dtype, const RowGeometry& g);

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
