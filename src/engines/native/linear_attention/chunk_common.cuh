// Internal, CUDA sources only: what the chunked linear-attention kernels share. Warp-level
// m16n8k16 tensor-core products (mma.sync, f32 accumulation) over tiles in shared memory, the
// fragment loads for row- and column-major tiles, 16-bit conversions, and reads of a float
// operand whose dtype is known only at run time (gates and states: one value at a time).
//
// Fragment layout of mma.m16n8k16 (PTX ISA): lane = 4 r + c (r in 0..7, c in 0..3);
//   A (16 x 16): a0 (r, 2c..2c+1), a1 (r + 8, ...), a2 (r, 2c + 8..), a3 (r + 8, 2c + 8..)
//   B (16 x 8):  b0 (k 2c..2c+1, n r), b1 (k 2c + 8.., n r)
//   C (16 x 8):  c0, c1 (r, 2c..2c+1), c2, c3 (r + 8, 2c..2c+1)
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "engines/native/linear_attention/cp_async.cuh"
#include "engines/native/linear_attention/ldmatrix.cuh"
#include "engines/native/linear_attention/vec8.cuh"

namespace eagle::native::linear_attention {

// ---- 16-bit element types ----

template <typename T>
struct Elem;
template <>
struct Elem<__nv_bfloat16> {
  static __device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
  static __device__ __forceinline__ __nv_bfloat16 from_float(float x) {
    return __float2bfloat16_rn(x);
  }
  static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4],
                                             const uint32_t (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};
template <>
struct Elem<__half> {
  static __device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
  static __device__ __forceinline__ __half from_float(float x) { return __float2half_rn(x); }
  static __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4],
                                             const uint32_t (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
};

template <typename T>
__device__ __forceinline__ uint32_t bits16(T x) {
  return static_cast<uint32_t>(*reinterpret_cast<const unsigned short*>(&x));
}
// Two elements as one 32-bit register, `lo` in the low half (the mma operand order).
template <typename T>
__device__ __forceinline__ uint32_t pack2(T lo, T hi) {
  return bits16(lo) | (bits16(hi) << 16);
}
// ---- fragment loads from shared memory (ldmatrix.cuh: rows 16-byte aligned) ----

// A (m0.., k0..) of a tile stored [m][k] with leading dimension ld (elements).
template <typename T>
__device__ __forceinline__ void frag_a_mk(uint32_t (&a)[4], const T* s, int ld, int m0, int k0) {
  ldsm_a<true>(a, s, ld, m0, k0);
}
// A (m0.., k0..) of a tile stored transposed, [k][m].
template <typename T>
__device__ __forceinline__ void frag_a_km(uint32_t (&a)[4], const T* s, int ld, int m0, int k0) {
  ldsm_a<false>(a, s, ld, m0, k0);
}
// B (k0.., n0..) of a tile stored [n][k].
template <typename T>
__device__ __forceinline__ void frag_b_nk(uint32_t (&b)[2], const T* s, int ld, int n0, int k0) {
  ldsm_b<true>(b, s, ld, k0, n0);
}
// B (k0.., n0..) of a tile stored [k][n].
template <typename T>
__device__ __forceinline__ void frag_b_kn(uint32_t (&b)[2], const T* s, int ld, int n0, int k0) {
  ldsm_b<false>(b, s, ld, k0, n0);
}

// acc[nt] += A B(k0.., n0 + 8 nt..) for each of NT (even) 8-column tiles of B, B's fragments
// two at a time (one ldmatrix .x4). KContig: B stored [n][k], else [k][n].
template <bool KContig, typename T, int NT>
__device__ __forceinline__ void mma_tiles(float (&acc)[NT][4], const uint32_t (&a)[4], const T* s,
                                          int ld, int n0, int k0) {
  static_assert(NT % 2 == 0, "B's tiles go in pairs");
#pragma unroll
  for (int nt = 0; nt < NT; nt += 2) {
    uint32_t b0[2], b1[2];
    ldsm_b2<KContig>(b0, b1, s, ld, k0, n0 + 8 * nt);
    Elem<T>::mma(acc[nt], a, b0);
    Elem<T>::mma(acc[nt + 1], a, b1);
  }
}

// Accumulator tiles t0 and t1 (16 x 8 each: columns 8n.. and 8n + 8..) as the A fragment of
// their 16 x 16 block, rounded to T: an accumulator's layout is the A fragment's.
template <typename T>
__device__ __forceinline__ void tiles_to_a(const float (&t0)[4], const float (&t1)[4],
                                           uint32_t (&a)[4]) {
  a[0] = pack2f<T>(t0[0], t0[1]);
  a[1] = pack2f<T>(t0[2], t0[3]);
  a[2] = pack2f<T>(t1[0], t1[1]);
  a[3] = pack2f<T>(t1[2], t1[3]);
}
// A row of 2 Blocks accumulator tiles (16 x 8 each) as the A fragments of its Blocks 16 x 16
// blocks.
template <typename T, int Tiles, int Blocks>
__device__ __forceinline__ void tiles_to_a(const float (&t)[Tiles][4], uint32_t (&a)[Blocks][4]) {
  static_assert(Tiles == 2 * Blocks, "two tiles per block");
#pragma unroll
  for (int b = 0; b < Blocks; ++b) tiles_to_a<T>(t[2 * b], t[2 * b + 1], a[b]);
}

// A fragments of a warp's 16 x (16 Blocks) tile stored transposed: stmatrix into the warp's
// staging tile [16 Blocks][SS] (SS a multiple of 8), then its rows below `rows` to global memory,
// row x at dst + x * ld (16 elements, two 16-byte pieces; dst 16-byte aligned).
template <int Blocks, int SS, typename T>
__device__ __forceinline__ void store_transposed(T* stage, const uint32_t (&a)[Blocks][4], T* dst,
                                                 int64_t ld, int rows = 16 * Blocks) {
  const int lane = threadIdx.x & 31, q = lane >> 3, i = lane & 7;
#pragma unroll
  for (int kk = 0; kk < Blocks; ++kk)
    stsm_x4_trans(stage + (16 * kk + (q >> 1) * 8 + i) * SS + (q & 1) * 8, a[kk]);
  __syncwarp();
#pragma unroll
  for (int x = lane; x < 32 * Blocks; x += 32) {
    const int row = x >> 1, half = (x & 1) * 8;
    if (row < rows)
      *reinterpret_cast<uint4*>(dst + row * ld + half) =
          *reinterpret_cast<const uint4*>(stage + row * SS + half);
  }
  __syncwarp();
}

// The accumulator element of fragment position e (0..3): row and column inside the 16 x 8 tile.
__device__ __forceinline__ int acc_row(int e) {
  return ((threadIdx.x & 31) >> 2) + (e >= 2 ? 8 : 0);
}
__device__ __forceinline__ int acc_col(int e) {
  return (threadIdx.x & 3) * 2 + (e & 1);
}

// A warp's 16 x 8 NT accumulator tiles rounded to T, row r at out + r * ld (16-byte aligned
// rows), rows at or past `rows` left unwritten. stage null: each lane stores its fragment pairs
// (4 bytes, eight rows a store: half sectors). Else through the warp's staging tile [16][ls] in
// shared memory (ls = 8 NT + 8: the pair writes fall in distinct banks), then in 16-byte pieces,
// a row's pieces side by side (full sectors).
template <typename T, int NT>
__device__ __forceinline__ void store_acc_rows(T* out, int64_t ld, const float (&acc)[NT][4],
                                               int rows, T* stage) {
  constexpr int ls = 8 * NT + 8;
  if (stage == nullptr) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int e = 0; e < 4; e += 2)
        if (acc_row(e) < rows)
          *reinterpret_cast<uint32_t*>(out + acc_row(e) * ld + nt * 8 + acc_col(e)) =
              pack2f<T>(acc[nt][e], acc[nt][e + 1]);
    return;
  }
  __syncwarp();  // the tile may be rows the warp's lanes have just read for each other
#pragma unroll
  for (int nt = 0; nt < NT; ++nt)
#pragma unroll
    for (int e = 0; e < 4; e += 2)
      *reinterpret_cast<uint32_t*>(stage + acc_row(e) * ls + nt * 8 + acc_col(e)) =
          pack2f<T>(acc[nt][e], acc[nt][e + 1]);
  __syncwarp();
#pragma unroll
  for (int i = threadIdx.x & 31; i < 16 * NT; i += 32) {
    const int r = i / NT, c = (i % NT) * 8;
    if (r < rows)
      *reinterpret_cast<uint4*>(out + r * ld + c) =
          *reinterpret_cast<const uint4*>(stage + r * ls + c);
  }
  __syncwarp();  // the tile may be staged again at once
}

// ---- run-time dtype reads of scalar operands ----

// The dtypes a gate or state operand may have, as a kernel argument.
enum class Real : int32_t { f32 = 0, bf16 = 1, f16 = 2 };

__device__ __forceinline__ float load_real(const void* p, int64_t i, Real t) {
  switch (t) {
    case Real::bf16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i]);
    case Real::f16:
      return __half2float(static_cast<const __half*>(p)[i]);
    default:
      return static_cast<const float*>(p)[i];
  }
}
__device__ __forceinline__ void store_real(void* p, int64_t i, Real t, float x) {
  switch (t) {
    case Real::bf16:
      static_cast<__nv_bfloat16*>(p)[i] = __float2bfloat16_rn(x);
      break;
    case Real::f16:
      static_cast<__half*>(p)[i] = __float2half_rn(x);
      break;
    default:
      static_cast<float*>(p)[i] = x;
  }
}

// ---- rows of a chunk ----

// Copies ROWS rows of COLS elements (row i at g + i * stride, 16-byte aligned) into s [ROWS][ld];
// rows at or past `valid` become zero (padding rows are never read: they may hold NaN). Async:
// through cp.async, in flight until cp_async_commit + cp_async_wait and a __syncthreads (then
// `valid` must be >= 1: row 0 stands in as the address of the rows not read). Threads: the
// CTA's threads when known at compile time (the copy loop then unrolls, its addressing hoisted:
// what a state loop running once per chunk wants), else 0 for `threads` (the threads that
// take part, threads 0 .. threads - 1), or 0 for blockDim.x.
template <typename T, int COLS, int ROWS = 64, bool Async = false, int Threads = 0>
__device__ __forceinline__ void load_chunk_rows(T* s, int ld, const T* g, int64_t stride, int valid,
                                                int threads = 0) {
  constexpr int kVec = COLS / 8, kPieces = ROWS * kVec;  // 16-byte pieces per row, in all
  auto copy = [&](int i) {
    const int row = i / kVec, col = (i % kVec) * 8;
    const bool in = row < valid;
    if constexpr (Async) {
      cp_async16(s + row * ld + col, in ? g + row * stride + col : g, in);
    } else {
      uint4 x = make_uint4(0, 0, 0, 0);
      if (in) x = *reinterpret_cast<const uint4*>(g + row * stride + col);
      *reinterpret_cast<uint4*>(s + row * ld + col) = x;
    }
  };
  if constexpr (Threads > 0) {
#pragma unroll
    for (int t = 0; t < (kPieces + Threads - 1) / Threads; ++t) {
      const int i = static_cast<int>(threadIdx.x) + t * Threads;
      if (kPieces % Threads == 0 || i < kPieces) copy(i);
    }
  } else {
    const int step = threads > 0 ? threads : static_cast<int>(blockDim.x);
    for (int i = threadIdx.x; i < kPieces; i += step) copy(i);
  }
}

// Normalizes the 64 rows of s in place (each warp 16 rows at a time, two lanes a row, eight
// elements at a time); inv[row] receives each row's factor when not null.
template <typename T, int COLS>
__device__ __forceinline__ void normalize_rows(T* s, int ld, float* inv) {
  const int lane = threadIdx.x & 31, warps = blockDim.x / 32;
  for (int row0 = 16 * (threadIdx.x / 32); row0 < 64; row0 += 16 * warps) {
    const float r = warp_rows16_inv_norm<T, COLS>(s, ld, row0);
    T* at = s + (row0 + (lane & 15)) * ld + (lane >> 4) * (COLS / 2);  // the half row it summed
#pragma unroll
    for (int c = 0; c < COLS / 2; c += 8) {
      float x[8];
      load8(at + c, x);
#pragma unroll
      for (int m = 0; m < 8; ++m) x[m] *= r;
      store8(at + c, x);
    }
    if (inv && lane < 16) inv[row0 + lane] = r;
  }
}

}  // namespace eagle::native::linear_attention
