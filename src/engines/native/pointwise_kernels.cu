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

// 16 bytes of T per thread (kPointwiseVectorBytes / sizeof(T) elements): one vector load per
// operand and one store, for n a multiple of that and every pointer 16-byte aligned (the
// caller's check). The scalar kernel moved 2-byte elements at under 1 TB/s on the H200.
template <PwOp Op, class T>
__global__ void pointwise_vec_kernel(const T* a, const T* b, T* out, int64_t n) {
  constexpr int V = kPointwiseVectorBytes / static_cast<int>(sizeof(T));
  const int64_t groups = n / V;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < groups;
       g += stride) {
    const uint4 ra = reinterpret_cast<const uint4*>(a)[g];
    uint4 rb = ra;
    if constexpr (is_binary(Op)) rb = reinterpret_cast<const uint4*>(b)[g];
    const auto* xa = reinterpret_cast<const T*>(&ra);
    const auto* xb = reinterpret_cast<const T*>(&rb);
    uint4 ro;
    auto* xo = reinterpret_cast<T*>(&ro);
#pragma unroll
    for (int j = 0; j < V; ++j)
      xo[j] = detail::from_acc<T>(
          apply<Op>(detail::to_acc(xa[j]), is_binary(Op) ? detail::to_acc(xb[j]) : 0.f));
    reinterpret_cast<uint4*>(out)[g] = ro;
  }
}

template <PwOp Op, class T>
const void* kernel_of(bool vector) {
  return vector ? reinterpret_cast<const void*>(&pointwise_vec_kernel<Op, T>)
                : reinterpret_cast<const void*>(&pointwise_kernel_impl<Op, T>);
}

template <PwOp Op>
const void* kernel_for(DType dtype, bool vector) {
  switch (dtype) {
    case DType::f32:
      return kernel_of<Op, float>(vector);
    case DType::f16:
      return kernel_of<Op, __half>(vector);
    case DType::bf16:
      return kernel_of<Op, __nv_bfloat16>(vector);
    default:
      return nullptr;
  }
}

thread_local cudaError_t last_error = cudaSuccess;

}  // namespace

const void* pointwise_kernel(PwOp op, DType dtype, bool vector) {
  switch (op) {
#define EAGLE_PW_CASE(name, binary) \
  case PwOp::name:                  \
    return kernel_for<PwOp::name>(dtype, vector);
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
