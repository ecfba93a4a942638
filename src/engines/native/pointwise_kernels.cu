#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "engines/native/pointwise_kernels.hpp"
#include "engines/native/pointwise_math.cuh"
#include "kernel/cuda_numeric.cuh"

namespace eagle::native {

namespace {

template <PwOp Op, class T>
__global__ void pointwise_kernel_impl(const T* a, const T* b, T* out, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    if constexpr (is_binary(Op)) {
      out[i] = detail::from_acc<T>(apply<Op>(detail::to_acc(a[i]), detail::to_acc(b[i])));
    } else {
      out[i] = detail::from_acc<T>(apply<Op>(detail::to_acc(a[i]), 0.f));
    }
  }
}

template <PwOp Op>
const void* kernel_for(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return reinterpret_cast<const void*>(&pointwise_kernel_impl<Op, float>);
    case DType::f16:
      return reinterpret_cast<const void*>(&pointwise_kernel_impl<Op, __half>);
    case DType::bf16:
      return reinterpret_cast<const void*>(&pointwise_kernel_impl<Op, __nv_bfloat16>);
    default:
      return nullptr;
  }
}

thread_local cudaError_t last_error = cudaSuccess;

}  // namespace

const void* pointwise_kernel(PwOp op, DType dtype) {
  switch (op) {
#define EAGLE_PW_CASE(name, binary) \
  case PwOp::name:                  \
    return kernel_for<PwOp::name>(dtype);
    EAGLE_POINTWISE_OPS(EAGLE_PW_CASE)
#undef EAGLE_PW_CASE
  }
  return nullptr;
}

bool launch_pointwise(const void* kernel, const void* a, const void* b, void* out, int64_t n,
                      unsigned grid, unsigned block, void* stream) noexcept {
  void* args[] = {const_cast<void**>(&a), const_cast<void**>(&b), &out, &n};
  last_error =
      cudaLaunchKernel(kernel, dim3(grid), dim3(block), args, 0, static_cast<cudaStream_t>(stream));
  return last_error == cudaSuccess;
}

const char* last_launch_error() noexcept {
  return cudaGetErrorString(last_error);
}

}  // namespace eagle::native
