// Data movement of the varlen attention backward: the f32 <-> bf16/f16 packing, cp.async tile
// loads with zero fill into 128-byte-swizzled shared memory (the wgmma operand layout of
// bwd_wgmma.cuh), the proxy fence between them and wgmma, raw shared-memory stores and ex2.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace eagle::native::attention::bwd {

template <bool kBf16>
struct Io;
template <>
struct Io<true> {
  using T = __nv_bfloat16;
  static __device__ __forceinline__ uint32_t pack(float a, float b) {
    __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<uint32_t*>(&h);
  }
  static __device__ __forceinline__ float2 unpack(uint32_t u) {
    return __bfloat1622float2(*reinterpret_cast<__nv_bfloat162*>(&u));
  }
};
template <>
struct Io<false> {
  using T = __half;
  static __device__ __forceinline__ uint32_t pack(float a, float b) {
    __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<uint32_t*>(&h);
  }
  static __device__ __forceinline__ float2 unpack(uint32_t u) {
    return __half22float2(*reinterpret_cast<__half2*>(&u));
  }
};

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 16 bytes global -> shared; src_bytes 0 writes zeros and reads nothing.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n");
}
// 4 bytes global -> shared (row statistics); src_bytes 0 writes zero.
__device__ __forceinline__ void cp_async4(void* dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(src_bytes));
}
// 2^x; exactly 0 for x = -inf.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ void cp_async_wait_all() {
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}

// Rows [0, rows) of a tile of kRows rows x kD elements (`stride` elements between rows in global
// memory, `src` at row 0) into shared memory in 128-byte swizzle atoms (the wgmma operand
// layout): column block cb of 64 elements holds rows at 128-byte pitch from cb * kRows * 128;
// 16-byte chunk c of row r sits at chunk (c ^ r % 8). `dst` is 1024-byte aligned. Rows >= valid
// become zeros and are never read, so padding (NaN included) never enters a product.
template <int kRows, int kD, int kThreads, class T>
__device__ __forceinline__ void load_tile_sw128(T* dst, const T* src, int64_t stride, int valid) {
  constexpr int kChunks = kD / 8;
  unsigned char* base = reinterpret_cast<unsigned char*>(dst);
#pragma unroll
  for (int idx = static_cast<int>(threadIdx.x); idx < kRows * kChunks; idx += kThreads) {
    const int r = idx / kChunks, c = idx % kChunks;
    const bool ok = r < valid;
    const T* s = ok ? src + r * stride + c * 8 : src;
    cp_async16(base + (c / 8) * kRows * 128 + r * 128 + (((c % 8) ^ (r % 8)) * 16), s, ok ? 16 : 0);
  }
}
// Orders this thread's generic-proxy shared-memory writes (stores, cp.async) before later
// async-proxy reads (wgmma); a barrier must follow.
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// x, opaque to the compiler: addresses derived from it are recomputed where used instead of
// being hoisted out of the block loop into registers the accumulators need.
__device__ __forceinline__ uint32_t opaque(uint32_t x) {
  asm volatile("mov.b32 %0, %0;\n" : "+r"(x));
  return x;
}
__device__ __forceinline__ void st_shared_b32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ void st_shared_v2(uint32_t addr, float x, float y) {
  asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(addr), "f"(x), "f"(y) : "memory");
}

// The top of a double-buffered block loop: block b's copies (issued during block b - 1) landed
// for every thread, and every thread is done with block b - 1, so its buffer (the one block
// b + 1 fills) is free. The one barrier per block does both (none at the end of a block).
__device__ __forceinline__ void block_landed() {
  cp_async_wait_all();
  fence_proxy_async();  // the copies are read by wgmma
  __syncthreads();
}

}  // namespace eagle::native::attention::bwd
