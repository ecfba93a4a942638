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
};
// Issues one launch on `stream` (a cudaStream_t); false on a launch error (launch_status.hpp).
using SoftmaxLauncher = bool (*)(const SoftmaxArgs& args, const RowGeometry& g,
                                 void* stream) noexcept;
// The launcher for (dtype, g.vec, g.cached), or nullptr (no CUDA, or a dtype without a kernel).
SoftmaxLauncher softmax_launcher(DType dtype, const RowGeometry& g);

// The backward from the forward's output y and dy (one dtype): dx = y * (dy - sum(dy * y)), or
// for log softmax dx = dy - exp(y) * sum(dy). y and dy stay in registers when the row fits.
struct SoftmaxBwdArgs {
  const void* y;
  const void* dy;
  void* dx;
  int64_t rows, len;
  bool log;
};
using SoftmaxBwdLauncher = bool (*)(const SoftmaxBwdArgs& args, const RowGeometry& g,
                                    void* stream) noexcept;
SoftmaxBwdLauncher softmax_bwd_launcher(DType dtype, const RowGeometry& g);

}  // namespace eagle::native
