// Our CUDA layer_norm and rms_norm backward from dy, x and the forward's f32 statistics, over
// dense row-major [rows, len]: f32, f16 or bf16 (dy, x and scale of one dtype), f32 math.
//   dx = inv_std * (g - [mean(g) for layer_norm] - xhat * mean(g * xhat)), g = dy * scale,
// a row per group of threads (registers when the row fits). dscale = sum over rows of
// dy * xhat and dbias = sum over rows of dy are column sums, deterministic: chunks of rows
// write double partials to the workspace and one pass adds them up in chunk order.
#pragma once

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
  void* dscale;      // null: not asked
  void* dbias;       // null: not asked
  double* partials;  // [2, chunks, len] when dscale or dbias is asked
  int64_t rows, len;
  int64_t chunk_rows, chunks;  // the rows of the column sums' chunks
};
// The rows kernel and, when asked, the column sums. False on a launch error.
using NormBwdLauncher = bool (*)(const NormBwdArgs& args, const RowGeometry& g,
                                 void* stream) noexcept;
NormBwdLauncher norm_bwd_launcher(DType dtype, const RowGeometry& g);

// Threads per block of the column-sum kernels (columns per block).
inline constexpr int kColumnThreads = 256;

}  // namespace eagle::native
