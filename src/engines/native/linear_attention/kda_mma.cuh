// Internal, CUDA sources only: warp-level bf16 tensor-core products (mma.sync m16n8k16, f32
// accumulation) over operands staged in shared memory (rows 16-byte aligned: ldmatrix.cuh). An
// operand is "k-contiguous" when the two elements a fragment register packs (k and k + 1) sit
// side by side, else ldmatrix transposes them in flight (no transposed copies needed).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "engines/native/linear_attention/ldmatrix.cuh"

namespace eagle::native::kda {

using bf16 = __nv_bfloat16;

// A (16 x 16 at m0, k0): KContig: A(m, k) = s[m * ld + k]; else A(m, k) = s[k * ld + m].
template <bool KContig>
__device__ __forceinline__ void load_a(const bf16* s, int ld, int m0, int k0, uint32_t (&a)[4]) {
  linear_attention::ldsm_a<KContig>(a, s, ld, m0, k0);
}

// B (16 x 8 at k0, n0): KContig: B(k, n) = s[n * ld + k]; else B(k, n) = s[k * ld + n].
template <bool KContig>
__device__ __forceinline__ void load_b(const bf16* s, int ld, int k0, int n0, uint32_t (&b)[2]) {
  linear_attention::ldsm_b<KContig>(b, s, ld, k0, n0);
}

__device__ __forceinline__ void mma(float c[4], const uint32_t a[4], const uint32_t b[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Where accumulator element e (0..3) of a 16 x 8 tile at (m0, n0) sits.
__device__ __forceinline__ int acc_row(int m0, int e) {
  return m0 + ((threadIdx.x & 31) >> 2) + (e >> 1) * 8;
}
__device__ __forceinline__ int acc_col(int n0, int e) {
  return n0 + (threadIdx.x & 3) * 2 + (e & 1);
}

// C (16 x 8*NT at m0, n0) += A (16 x K) B (K x 8*NT), K a multiple of 16.
template <bool AContig, bool BContig, int NT>
__device__ __forceinline__ void mma_rows(float (&c)[NT][4], const bf16* a, int lda, int m0,
                                         const bf16* b, int ldb, int n0, int k) {
  for (int k0 = 0; k0 < k; k0 += 16) {
    uint32_t fa[4];
    load_a<AContig>(a, lda, m0, k0, fa);
#pragma unroll
    for (int j = 0; j + 1 < NT; j += 2) {  // B's tiles in pairs: one ldmatrix .x4 each
      uint32_t f0[2], f1[2];
      linear_attention::ldsm_b2<BContig>(f0, f1, b, ldb, k0, n0 + 8 * j);
      mma(c[j], fa, f0);
      mma(c[j + 1], fa, f1);
    }
    if constexpr (NT % 2 == 1) {
      uint32_t fb[2];
      load_b<BContig>(b, ldb, k0, n0 + 8 * (NT - 1), fb);
      mma(c[NT - 1], fa, fb);
    }
  }
}

}  // namespace eagle::native::kda
