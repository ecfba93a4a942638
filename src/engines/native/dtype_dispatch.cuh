// The element-type switch of the native launchers: a launcher table is written once per element
// type as a template, and this picks its instance for a runtime DType.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "eagle/core/dtype.hpp"

namespace eagle::native {

// pick.template operator()<T>() for the CUDA element type T of `dtype` (f32, f16, bf16): a
// lambda `[&]<class T>() { return launcher_for<T>(...); }`. Any other dtype gives the empty
// result (a null launcher: the engine declined it before).
template <class Pick>
auto by_float_dtype(DType dtype, Pick&& pick) {
  using Result = decltype(pick.template operator()<float>());
  switch (dtype) {
    case DType::f32:
      return pick.template operator()<float>();
    case DType::f16:
      return pick.template operator()<__half>();
    case DType::bf16:
      return pick.template operator()<__nv_bfloat16>();
    default:
      return Result{};
  }
}

}  // namespace eagle::native
