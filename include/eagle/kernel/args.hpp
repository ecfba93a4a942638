// The argument block every eagle kernel receives, CPU or CUDA. Its layout is fixed and known to
// eagle, so a built graph can patch pointers in place (bind) without knowing the kernel.
#pragma once

#include <cstdint>

namespace eagle {

inline constexpr int kMaxKernelArrays = 6;
inline constexpr int kMaxKernelScalars = 4;
inline constexpr int kMaxKernelDims = 4;

// One array argument as a kernel sees it: contiguous, row-major.
struct ArrayArg {
  void* data;
  int64_t numel;
  int64_t dims[kMaxKernelDims];  // leading dims; dims beyond kMaxKernelDims fold into the last
  int32_t ndim;
  int32_t dtype;  // eagle::DType as an integer
};

union ScalarArg {
  double f;
  int64_t i;
};

// Passed by value as the single parameter of every eagle CUDA kernel
// (`__global__ void k(eagle::KernelArgs)`), and by reference to every CPU implementation.
// Arrays are in the order of the kernel's parameter list; so are scalars.
struct KernelArgs {
  ArrayArg arrays[kMaxKernelArrays];
  ScalarArg scalars[kMaxKernelScalars];
  int32_t num_arrays;
  int32_t num_scalars;
};

}  // namespace eagle
