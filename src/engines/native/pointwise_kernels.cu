#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "engines/native/pointwise_kernels.hpp"

namespace eagle::native {

namespace {

__device__ __forceinline__ float to_f(float x) {
  return x;
}
__device__ __forceinline__ float to_f(__half x) {
  return __half2float(x);
}
__device__ __forceinline__ float to_f(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
template <class T>
__device__ __forceinline__ T from_f(float x);
template <>
__device__ __forceinline__ float from_f<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __half from_f<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

template <PwOp Op>
__device__ __forceinline__ float apply(float a, float b) {
  if constexpr (Op == PwOp::add) return a + b;
  if constexpr (Op == PwOp::sub) return a - b;
  if constexpr (Op == PwOp::mul) return a * b;
  if constexpr (Op == PwOp::div) return a / b;
  if constexpr (Op == PwOp::max) return (a != a || b != b) ? a + b : fmaxf(a, b);
  if constexpr (Op == PwOp::min) return (a != a || b != b) ? a + b : fminf(a, b);
  if constexpr (Op == PwOp::neg) return -a;
  if constexpr (Op == PwOp::abs) return fabsf(a);
  if constexpr (Op == PwOp::exp) return expf(a);
  if constexpr (Op == PwOp::log) return logf(a);
  if constexpr (Op == PwOp::sqrt) return sqrtf(a);
  if constexpr (Op == PwOp::rsqrt) return rsqrtf(a);
  if constexpr (Op == PwOp::tanh) return tanhf(a);
  if constexpr (Op == PwOp::sigmoid) return 1.0f / (1.0f + expf(-a));
  if constexpr (Op == PwOp::relu) return a != a ? a : fmaxf(a, 0.0f);
  if constexpr (Op == PwOp::gelu) return 0.5f * a * (1.0f + erff(a * 0.70710678118654752f));
  if constexpr (Op == PwOp::silu) return a / (1.0f + expf(-a));
  if constexpr (Op == PwOp::square) return a * a;
  if constexpr (Op == PwOp::identity) return a;
  return 0.0f;
}

template <PwOp Op, class T>
__global__ void pointwise_kernel_impl(const T* a, const T* b, T* out, int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    if constexpr (is_binary(Op)) {
      out[i] = from_f<T>(apply<Op>(to_f(a[i]), to_f(b[i])));
    } else {
      out[i] = from_f<T>(apply<Op>(to_f(a[i]), 0.f));
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
#define EAGLE_PW_CASE(name) \
  case PwOp::name:          \
    return kernel_for<PwOp::name>(dtype);
    EAGLE_PW_CASE(add)
    EAGLE_PW_CASE(sub)
    EAGLE_PW_CASE(mul)
    EAGLE_PW_CASE(div)
    EAGLE_PW_CASE(max)
    EAGLE_PW_CASE(min)
    EAGLE_PW_CASE(neg)
    EAGLE_PW_CASE(abs)
    EAGLE_PW_CASE(exp)
    EAGLE_PW_CASE(log)
    EAGLE_PW_CASE(sqrt)
    EAGLE_PW_CASE(rsqrt)
    EAGLE_PW_CASE(tanh)
    EAGLE_PW_CASE(sigmoid)
    EAGLE_PW_CASE(relu)
    EAGLE_PW_CASE(gelu)
    EAGLE_PW_CASE(silu)
    EAGLE_PW_CASE(square)
    EAGLE_PW_CASE(identity)
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
