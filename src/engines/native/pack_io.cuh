// Internal, CUDA sources only: 16-byte packs of a row read and written as single 16-byte
// accesses. A pack struct copied through memory (rows::store) can come out of the compiler as
// 2- or 4-byte stores where it cannot prove the address's alignment (seen in the PTX of the
// softmax and norm backward kernels at sm_90a: of a thread's 4 pack stores, 1 was 16 bytes), so
// these build the 16 bytes in registers and store them with one st.global.v4.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "kernel/cuda_numeric.cuh"

namespace eagle::native::pack_io {

template <class T>
__device__ __forceinline__ unsigned bits16(float v) {
  if constexpr (std::is_same_v<T, __half>)
    return __half_as_ushort(__float2half_rn(v));
  else
    return __bfloat16_as_ushort(__float2bfloat16_rn(v));
}

template <class T>
__device__ __forceinline__ float from_bits16(unsigned short b) {
  if constexpr (std::is_same_v<T, __half>)
    return __half2float(__ushort_as_half(b));
  else
    return __bfloat162float(__ushort_as_bfloat16(b));
}

// Stores VEC floats as T at p + i (rounded as detail::from_acc does): one 16-byte store when the
// pack is 16 bytes (p + i must be 16-byte aligned), element stores otherwise.
template <class T, int VEC>
__device__ __forceinline__ void store(T* p, int64_t i, const float (&in)[VEC]) {
  if constexpr (sizeof(T) * VEC == 16) {
    unsigned w[4];
    if constexpr (sizeof(T) == 4) {
#pragma unroll
      for (int q = 0; q < 4; ++q) w[q] = __float_as_uint(in[q]);
    } else {
      static_assert(sizeof(T) == 2);
#pragma unroll
      for (int q = 0; q < 4; ++q) w[q] = bits16<T>(in[2 * q]) | (bits16<T>(in[2 * q + 1]) << 16);
    }
    asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};\n" ::"l"(p + i), "r"(w[0]), "r"(w[1]),
                 "r"(w[2]), "r"(w[3])
                 : "memory");
  } else {
#pragma unroll
    for (int j = 0; j < VEC; ++j) p[i + j] = detail::from_acc<T>(in[j]);
  }
}

// The VEC elements of T in a 16-byte pack held as a uint4, as floats.
template <class T, int VEC>
__device__ __forceinline__ void unpack(const uint4& raw, float (&out)[VEC]) {
  static_assert(sizeof(T) * VEC == 16);
  const unsigned w[4] = {raw.x, raw.y, raw.z, raw.w};
  if constexpr (sizeof(T) == 4) {
#pragma unroll
    for (int q = 0; q < 4; ++q) out[q] = __uint_as_float(w[q]);
  } else {
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      out[2 * q] = from_bits16<T>(static_cast<unsigned short>(w[q] & 0xffffu));
      out[2 * q + 1] = from_bits16<T>(static_cast<unsigned short>(w[q] >> 16));
    }
  }
}

// Loads the 16-byte pack at p + i (16-byte aligned) as a uint4.
template <class T>
__device__ __forceinline__ uint4 load16(const T* p, int64_t i) {
  return *reinterpret_cast<const uint4*>(p + i);
}

// A pack of a row kept as loaded (16-bit elements stay packed, half the registers of floats):
// one uint4 for a 16-byte pack, the elements otherwise.
template <class T, int VEC>
struct Raw {
  T v[VEC];
};
template <class T, int VEC>
requires(sizeof(T) * VEC == 16) struct Raw<T, VEC> {
  uint4 u;
};

template <class T, int VEC>
__device__ __forceinline__ Raw<T, VEC> load_raw(const T* p, int64_t i) {
  Raw<T, VEC> r;
  if constexpr (sizeof(T) * VEC == 16) {
    r.u = load16(p, i);
  } else {
#pragma unroll
    for (int j = 0; j < VEC; ++j) r.v[j] = p[i + j];
  }
  return r;
}

template <class T, int VEC>
__device__ __forceinline__ void unpack_raw(const Raw<T, VEC>& r, float (&out)[VEC]) {
  if constexpr (sizeof(T) * VEC == 16) {
    unpack<T, VEC>(r.u, out);
  } else {
#pragma unroll
    for (int j = 0; j < VEC; ++j) out[j] = detail::to_acc(r.v[j]);
  }
}

}  // namespace eagle::native::pack_io
