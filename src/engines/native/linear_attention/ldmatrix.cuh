// Internal, CUDA sources only: mma.m16n8k16 fragments of 16-bit tiles in shared memory loaded by
// ldmatrix (one instruction for what took four to eight 16- or 32-bit loads), transposed in
// flight where the tile stores the fragment's pairs apart. Tiles: rows 16-byte aligned (the
// base 16-byte aligned, the row stride `ld` a multiple of 8 elements) and fragment corners at
// multiples of 8, which every tile of the chunked kernels is.
//
// ldmatrix .x4 loads four 8 x 8 matrices, lanes 8q..8q+7 giving the rows of matrix q; thread t
// receives row t / 4, columns 2 (t % 4) and 2 (t % 4) + 1 of each (.trans: of its transpose),
// which is the mma fragment layout of chunk_common.cuh's header.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace eagle::native::linear_attention {

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

template <bool Trans>
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const void* row) {
  if constexpr (Trans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(row)));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(shared_address(row)));
}

template <bool Trans>
__device__ __forceinline__ void ldsm_x2(uint32_t (&r)[2], const void* row) {
  if constexpr (Trans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(shared_address(row)));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
                 : "=r"(r[0]), "=r"(r[1])
                 : "r"(shared_address(row)));
}

// A (16 x 16 at m0, k0): KContig, A(m, k) = s[m * ld + k]; else A(m, k) = s[k * ld + m].
// Matrices: (m0, k0), (m0 + 8, k0), (m0, k0 + 8), (m0 + 8, k0 + 8).
template <bool KContig, typename T>
__device__ __forceinline__ void ldsm_a(uint32_t (&a)[4], const T* s, int ld, int m0, int k0) {
  const int lane = threadIdx.x & 31, q = lane >> 3, i = lane & 7;
  const int m = m0 + (q & 1) * 8, k = k0 + (q >> 1) * 8;
  if constexpr (KContig)
    ldsm_x4<false>(a, s + (m + i) * ld + k);
  else
    ldsm_x4<true>(a, s + (k + i) * ld + m);
}

// B (16 x 8 at k0, n0): KContig, B(k, n) = s[n * ld + k]; else B(k, n) = s[k * ld + n].
// Matrices: (k0, n0), (k0 + 8, n0); lanes 16-31 give addresses that .x2 ignores.
template <bool KContig, typename T>
__device__ __forceinline__ void ldsm_b(uint32_t (&b)[2], const T* s, int ld, int k0, int n0) {
  const int lane = threadIdx.x & 31, k = k0 + ((lane >> 3) & 1) * 8, i = lane & 7;
  if constexpr (KContig)
    ldsm_x2<false>(b, s + (n0 + i) * ld + k);
  else
    ldsm_x2<true>(b, s + (k + i) * ld + n0);
}

// Two B fragments side by side, (k0, n0) into b0 and (k0, n0 + 8) into b1, by one .x4.
template <bool KContig, typename T>
__device__ __forceinline__ void ldsm_b2(uint32_t (&b0)[2], uint32_t (&b1)[2], const T* s, int ld,
                                        int k0, int n0) {
  const int lane = threadIdx.x & 31, q = lane >> 3, i = lane & 7;
  const int k = k0 + (q & 1) * 8, n = n0 + (q >> 1) * 8;
  uint32_t r[4];
  if constexpr (KContig)
    ldsm_x4<false>(r, s + (n + i) * ld + k);
  else
    ldsm_x4<true>(r, s + (k + i) * ld + n);
  b0[0] = r[0], b0[1] = r[1], b1[0] = r[2], b1[1] = r[3];
}

// The inverse of ldsm_x4<true>: four 8 x 8 matrices held in fragment layout (register q of
// thread t: row t / 4, columns 2 (t % 4) and 2 (t % 4) + 1 of matrix q) stored transposed, lanes
// 8q..8q+7 giving the addresses of matrix q's transposed rows (its columns). sm_90.
__device__ __forceinline__ void stsm_x4_trans(void* row, const uint32_t (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(
                   shared_address(row)),
               "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}

}  // namespace eagle::native::linear_attention
