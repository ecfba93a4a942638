// Internal, CUDA sources only: eight consecutive elements at a time (one 16-byte access of
// 16-bit elements, two of f32), for the element-wise passes and row sums of the chunk kernels,
// whose index arithmetic per element otherwise outweighs the arithmetic itself; and 2^x on the
// SFU.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace eagle::native::linear_attention {

// log2(e): gates kept in base-2 units (G log2 e) make every e^x one ex2.
constexpr float kLog2e = 1.4426950408889634f;

// 2^x (ex2.approx: what __expf uses after its own multiply by log2 e).
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// x[0..7] = p[0..7]; p 16-byte aligned.
__device__ __forceinline__ void load8(const float* p, float (&x)[8]) {
  const float4 a = reinterpret_cast<const float4*>(p)[0];
  const float4 b = reinterpret_cast<const float4*>(p)[1];
  x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w;
  x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
}

__device__ __forceinline__ float2 unpack2(const __nv_bfloat162& v) {
  return __bfloat1622float2(v);
}
__device__ __forceinline__ float2 unpack2(const __half2& v) {
  return __half22float2(v);
}

// x[0..7] = p[0..7] as floats, p (bf16 or f16) 16-byte aligned.
template <typename T>
__device__ __forceinline__ void load8(const T* p, float (&x)[8]) {
  using T2 = std::conditional_t<std::is_same_v<T, __half>, __half2, __nv_bfloat162>;
  const uint4 raw = *reinterpret_cast<const uint4*>(p);
  const T2* h = reinterpret_cast<const T2*>(&raw);
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const float2 f = unpack2(h[e]);
    x[2 * e] = f.x;
    x[2 * e + 1] = f.y;
  }
}

// Two values rounded to T (bf16 or f16) as one 32-bit register, `lo` in the low half (the mma
// operand order): one paired conversion.
template <typename T>
__device__ __forceinline__ uint32_t pack2f(float lo, float hi) {
  uint32_t bits;
  if constexpr (std::is_same_v<T, __half>)
    *reinterpret_cast<__half2*>(&bits) = __floats2half2_rn(lo, hi);
  else
    *reinterpret_cast<__nv_bfloat162*>(&bits) = __floats2bfloat162_rn(lo, hi);
  return bits;
}

// The eight values rounded to T (bf16 by default, or f16) as one 16-byte word.
template <typename T = __nv_bfloat16>
__device__ __forceinline__ uint4 pack8(const float (&x)[8]) {
  return make_uint4(pack2f<T>(x[0], x[1]), pack2f<T>(x[2], x[3]), pack2f<T>(x[4], x[5]),
                    pack2f<T>(x[6], x[7]));
}

// p[0..7] = x rounded to T; p 16-byte aligned (shared or global memory).
template <typename T>
__device__ __forceinline__ void store8(T* p, const float (&x)[8]) {
  *reinterpret_cast<uint4*>(p) = pack8<T>(x);
}

// The dot products of rows row0 .. row0 + 15 of a and b (both [.][ld], COLS 16-bit elements a
// row, rows 16-byte aligned) by one whole warp, two lanes a row: lane l takes half l / 16 of row
// row0 + l % 16, eight elements at a time (eight lanes read eight rows: distinct banks), and one
// shuffle adds the halves; lanes l and l + 16 both get row row0 + l % 16's.
template <typename T, int COLS>
__device__ __forceinline__ float warp_rows16_dot(const T* a, const T* b, int ld, int row0) {
  static_assert(COLS % 16 == 0, "each half row is whole 16-byte pieces");
  const int lane = threadIdx.x & 31;
  const int at = (row0 + (lane & 15)) * ld + (lane >> 4) * (COLS / 2);
  float sum = 0;
#pragma unroll
  for (int c = 0; c < COLS / 2; c += 8) {
    float x[8], y[8];
    load8(a + at + c, x);
    load8(b + at + c, y);
#pragma unroll
    for (int m = 0; m < 8; ++m) sum += x[m] * y[m];
  }
  return sum + __shfl_xor_sync(0xffffffffu, sum, 16);
}

// The inverse l2 norms 1 / sqrt(sum x^2 + 1e-6) of the 16 rows row0.. of s [.][ld] by one whole
// warp (warp_rows16_dot: lanes l and l + 16 get row row0 + l % 16's).
template <typename T, int COLS>
__device__ __forceinline__ float warp_rows16_inv_norm(const T* s, int ld, int row0) {
  return rsqrtf(warp_rows16_dot<T, COLS>(s, s, ld, row0) + 1e-6f);
}

}  // namespace eagle::native::linear_attention
