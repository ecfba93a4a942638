// Internal: the arithmetic of the standard elementwise kernels, shared by the CPU and CUDA
// implementations so both compute the same function.
#pragma once

#include <cstdint>

#include "eagle/kernel/args.hpp"

#ifdef __CUDACC__
#define EAGLE_HD __host__ __device__ __forceinline__
#else
#define EAGLE_HD inline
#endif

namespace eagle::detail {

enum class EwOp : int { fill, copy, scale, axpy, add, mul, where };

// Element i of the output, computed in the accumulation type Acc. Loads go through `load`.
template <EwOp op, class Acc, class Load>
EAGLE_HD Acc ew_apply(const KernelArgs& a, int64_t i, Load load) {
  if constexpr (op == EwOp::fill) {
    (void)i;
    (void)load;
    return static_cast<Acc>(a.scalars[0].f);
  } else if constexpr (op == EwOp::copy) {
    return load(0, i);
  } else if constexpr (op == EwOp::scale) {
    return static_cast<Acc>(a.scalars[0].f) * load(0, i);
  } else if constexpr (op == EwOp::axpy) {
    return static_cast<Acc>(a.scalars[0].f) * load(0, i) + load(1, i);
  } else if constexpr (op == EwOp::add) {
    return load(0, i) + load(1, i);
  } else if constexpr (op == EwOp::mul) {
    return load(0, i) * load(1, i);
  } else {  // where: arrays are cond, a, b, out
    return static_cast<const uint8_t*>(a.arrays[0].data)[i] ? load(1, i) : load(2, i);
  }
}

// Index of the output array in the parameter list.
constexpr int ew_output_index(EwOp op) {
  return op == EwOp::fill                        ? 0
         : op == EwOp::copy || op == EwOp::scale ? 1
         : op == EwOp::where                     ? 3
                                                 : 2;
}

}  // namespace eagle::detail
