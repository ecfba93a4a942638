// Internal, CUDA sources only: eagle's host 16-bit types mapped to CUDA's, and the float
// arithmetic type each element type computes in, with its conversions.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "eagle/core/dtype.hpp"

namespace eagle::detail {

template <class T>
struct device_type {
  using type = T;
};
template <>
struct device_type<half> {
  using type = __half;
};
template <>
struct device_type<bfloat16> {
  using type = __nv_bfloat16;
};

template <class T>
struct acc_of {
  using type = T;
};
template <>
struct acc_of<__half> {
  using type = float;
};
template <>
struct acc_of<__nv_bfloat16> {
  using type = float;
};

template <class T>
__device__ __forceinline__ typename acc_of<T>::type to_acc(T v) {
  return v;
}
template <>
__device__ __forceinline__ float to_acc<__half>(__half v) {
  return __half2float(v);
}
template <>
__device__ __forceinline__ float to_acc<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
template <class T, class A>
__device__ __forceinline__ T from_acc(A v) {
  return static_cast<T>(v);
}
template <>
__device__ __forceinline__ __half from_acc<__half, float>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_acc<__nv_bfloat16, float>(float v) {
  return __float2bfloat16_rn(v);
}

}  // namespace eagle::detail
