// For CUDA sources only: hands a `__global__ void f(eagle::KernelArgsN<A, S>)` to eagle.
//
//   __global__ void my_kernel(const eagle::KernelArgsN<2, 1> a) { ... }
//   impl.cuda_function = eagle::cuda_function(&my_kernel);
//
// eagle carries its own CUDA runtime (linked into libeagle privately), and so does a program
// with CUDA code: a kernel is registered with the runtime of the program that compiled it. The
// resolver below is compiled into that program and turns the kernel into a cudaKernel_t, a
// driver-level handle that eagle's runtime launches and puts into graphs.
#pragma once

#include <cuda_runtime.h>

#include "eagle/kernel/kernel.hpp"

namespace eagle {

namespace cuda_function_detail {
// Internal linkage on purpose: each program resolves through its own runtime.
[[maybe_unused]] static const void* resolve(const void* stub) {
  cudaKernel_t kernel = nullptr;
  if (cudaGetKernel(&kernel, stub) != cudaSuccess) {
    (void)cudaGetLastError();  // leave no sticky error behind
    return nullptr;
  }
  return static_cast<const void*>(kernel);
}
}  // namespace cuda_function_detail

template <int A, int S>
CudaFunction cuda_function(void (*f)(KernelArgsN<A, S>)) {
  return CudaFunction{reinterpret_cast<const void*>(f), &cuda_function_detail::resolve, A, S};
}

}  // namespace eagle
