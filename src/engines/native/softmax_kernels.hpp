// Our CUDA softmax and log-softmax over the last axis of dense row-major [rows, len] data:
// f32, f16 or bf16 in and out, f32 math. One read of x when the row fits the registers (max,
// then sum of exponentials, both from registers), else an online pass (running max and rescaled
// sum) and a second read that writes y.
#pragma once

#include <cstdint>

#include "eagle/core/dtype.hpp"
#include "engines/native/row_geometry.hpp"

namespace eagle::native {

struct SoftmaxArgs {
  const void* x;
  void* y;
  int64_t rows, len;
  bool log;
  // Few long rows (split_softmax_launcher): each row in `splits` chunks of `chunk` elements, a
  // block each; the chunks' (max, sum) land in `partials` [rows * splits * 2] (the workspace)
  // and a second launch combines them in chunk order, then writes. Unused otherwise.
  int64_t splits = 1, chunk = 0;
  double* partials = nullptr;
};
// Issues its launches on `stream` (a cudaStream_t); false on a launch error (launch_status.hpp).
using SoftmaxLauncher = bool (*)(const SoftmaxArgs& args, const RowGeometry& g,
                                 void* stream) noexcept;
// The launcher for (dtype, g.vec, g.cached), or nullptr (no CUDA, or a dtype without a kernel).
SoftmaxLauncher softmax_launcher(DType dtype, const RowGeometry& g);
// The split launcher for (dtype, g.vec); g is a geometry over rows * splits chunks.
SoftmaxLauncher split_softmax_launcher(DType dtype, const RowGeometry& g);

// The backward from the forward's output y and dy (one dtype): dx = y * (dy - sum(dy * y)), or
// for log softmax dx = dy - exp(y) * sum(dy). y and dy stay in registers when the row fits.
struct SoftmaxBwdArgs {
  const void* y;
  const void* dy;
  void* dx;
  int64_t rows, len;
  bool log;
  // Few long rows (split_softmax_bwd_launcher): chunks of `chunk` elements, a block each, their
  // partial sums in `partials` [rows * splits] combined in chunk order by the writing pass.
  int64_t splits = 1, chunk = 0;
  double* partials = nullptr;
};
using SoftmaxBwdLauncher = bool (*)(const SoftmaxBwdArgs& args, const RowGeometry& g,
                                    void* stream) noexcept;
SoftmaxBwdLauncher softmax_bwd_launcher(DType dtype, const RowGeometry& g);
// The split launcher for (dtype, g.vec); g is a geometry over rows * splits chunks.
SoftmaxBwdLauncher split_softmax_bwd_launcher(DType dtype, const RowGeometry& g);

}  // namespace eagle::native
