// Internal: the arithmetic of the standard elementwise kernels, shared by the CPU and CUDA
// implementations so both compute the same function.
#pragma once

#include <cstdint>
#include <type_traits>

#include "eagle/core/convert.hpp"
#include "eagle/kernel/args.hpp"

#ifdef __CUDACC__
#define EAGLE_HD __host__ __device__ __forceinline__
#else
#define EAGLE_HD inline
#endif

namespace eagle::detail {

// broadcast, equal_mask and mul_div read one cell of their second (and third) input for every
// element: the helpers reverse mode records for sum and max (eagle/graph/derivative.hpp).
enum class EwOp : int { fill, copy, scale, axpy, add, mul, where, broadcast, equal_mask, mul_div };

// A real scalar in the arithmetic type: integers truncate toward zero and saturate, NaN is 0.
template <class Acc>
EAGLE_HD Acc scalar_as(double v) {
  if constexpr (std::is_integral_v<Acc>) {
    return saturating_cast<Acc>(v);
  } else {
    return static_cast<Acc>(v);
  }
}

// Element i of the output, computed in the accumulation type Acc. Loads go through `load`.
// `Args` is a KernelArgs view (CPU) or the KernelArgsN a CUDA kernel receives.
template <EwOp op, class Acc, class Args, class Load>
EAGLE_HD Acc ew_apply(const Args& a, int64_t i, Load load) {
  if constexpr (op == EwOp::fill) {
    (void)i;
    (void)load;
    return scalar_as<Acc>(a.scalars[0].f);
  } else if constexpr (op == EwOp::copy) {
    return load(0, i);
  } else if constexpr (op == EwOp::scale) {
    return scalar_as<Acc>(a.scalars[0].f) * load(0, i);
  } else if constexpr (op == EwOp::axpy) {
    return scalar_as<Acc>(a.scalars[0].f) * load(0, i) + load(1, i);
  } else if constexpr (op == EwOp::add) {
    return load(0, i) + load(1, i);
  } else if constexpr (op == EwOp::mul) {
    return load(0, i) * load(1, i);
  } else if constexpr (op == EwOp::where) {  // arrays are cond, a, b, out
    return static_cast<const uint8_t*>(a.arrays[0].data)[i] ? load(1, i) : load(2, i);
  } else if constexpr (op == EwOp::broadcast) {
    (void)i;
    return load(0, 0);
  } else if constexpr (op == EwOp::equal_mask) {
    return load(0, i) == load(1, 0) ? Acc(1) : Acc(0);
  } else {  // mul_div: x * num[0] / den[0]; an integer division by zero gives 0
    const Acc den = load(2, 0);
    if constexpr (std::is_integral_v<Acc>) {
      if (den == Acc(0)) return Acc(0);
    }
    return load(0, i) * load(1, 0) / den;
  }
}

// Array and scalar parameters of each op.
constexpr int ew_arrays(EwOp op) {
  return op == EwOp::fill                                                 ? 1
         : op == EwOp::copy || op == EwOp::scale || op == EwOp::broadcast ? 2
         : op == EwOp::where || op == EwOp::mul_div                       ? 4
                                                                          : 3;
}
constexpr int ew_scalars(EwOp op) {
  return op == EwOp::fill || op == EwOp::scale || op == EwOp::axpy ? 1 : 0;
}

// Index of the output array in the parameter list.
constexpr int ew_output_index(EwOp op) {
  return ew_arrays(op) - 1;
}

}  // namespace eagle::detail
