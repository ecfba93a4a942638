// Our CUDA layer_norm and rms_norm forward over dense row-major [rows, len] data (len = the
// product of the normalized trailing dims): f32, f16 or bf16 x, scale and bias of x's dtype,
// f32 math and f32 statistics. The mean and the variance are two passes over registers when the
// row fits them (the reference's two-pass form, no E[x^2] - E[x]^2 cancellation), else over x
// again.
#pragma once

#include <cstdint>

#include "eagle/core/dtype.hpp"
#include "engines/native/row_geometry.hpp"

namespace eagle::native {

struct NormArgs {
  const void* x;
  const void* scale;  // null: none
  const void* bias;   // null: none
  void* y;
  float* mean;     // [rows] or null (layer_norm's mean)
  float* inv_std;  // [rows] or null (inv_variance of layer_norm, inv_rms of rms_norm)
  int64_t rows, len;
  float epsilon;
  bool centered;  // layer_norm subtracts the mean; rms_norm does not
};
using NormLauncher = bool (*)(const NormArgs& args, const RowGeometry& g, void* stream) noexcept;
// The launcher for (dtype, g.vec, g.cached), or nullptr.
NormLauncher norm_launcher(DType dtype, const RowGeometry& g);

}  // namespace eagle::native
