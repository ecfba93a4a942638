// Internal, CUDA sources only: what the launches of the chunked kda / gdn2 forward
// (kda_fwd_sm90.cu) share: their parameters, the workspace slabs between them, 16-bit
// conversions and the chunk task of a flat index.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "eagle/ragged/schedule.hpp"
#include "engines/native/linear_attention/kda_kernels.hpp"
#include "engines/native/linear_attention/kda_mma.cuh"

namespace eagle::native::kda::fwd {

constexpr int C = kChunk;
constexpr int kPrepThreads = 256;

// What the three launches pass between them, per (flat chunk, value head), each [j][hv][...]:
// w, u, qg, kg, vn [C, D] bf16; aqk [C, C] bf16; h [D, D] bf16 (the state before the chunk);
// gl [D] f32 (e^{G_last}); t [C, C] bf16 ((I + A)^-1), kept only for the backward.
struct Scratch {
  bf16 *w, *u, *qg, *kg, *vn, *aqk, *h, *t;
  float* gl;
};

struct Params {
  Shape s;
  const void *q, *k, *v;
  const float *g, *beta, *b, *w;
  const float* h0;
  void* o;
  float* ht;
  const int32_t* offsets;
  Scratch ws;
  int64_t cap = 0;          // G_cap: the chunk tasks a flat grid covers
  int multiprocessors = 0;  // the device's, for the split state rows' balanced share (rows_split)
};

template <typename T>
__device__ __forceinline__ float to_f(T x);
template <>
__device__ __forceinline__ float to_f(bf16 x) {
  return __bfloat162float(x);
}
template <>
__device__ __forceinline__ float to_f(__half x) {
  return __half2float(x);
}
template <typename T>
__device__ __forceinline__ T from_f(float x);
template <>
__device__ __forceinline__ bf16 from_f(float x) {
  return __float2bfloat16(x);
}
template <>
__device__ __forceinline__ __half from_f(float x) {
  return __float2half(x);
}

__device__ __forceinline__ int64_t slab(const Params& p, int64_t j, int hv) {
  return j * p.s.value_heads + hv;
}

// The chunk's task, or sequence -1 past the batch's chunks.
__device__ __forceinline__ ragged::ChunkTask chunk_of(const Params& p, int64_t j) {
  return ragged::chunk_task(p.s.cu, p.offsets, p.s.slots, p.s.rows, C, j);
}

// f32 rows [C][ld] of a chunk in shared memory, as loaded: q, k, the erase gate b (gdn2; kda's
// beta per row in `betas`) and g. Scales q by its l2 norm (when `l2norm`) and `scale`, k by its
// l2 norm, makes b the erase key b k (kda: beta k), and g the per-channel cumsum G. Every thread
// of the CTA (Threads) calls it; a __syncthreads must follow.
template <int D, Gates GT, int Threads>
__device__ __forceinline__ void scale_rows_and_cumsum(float* Qs, float* Ks, float* Es, float* Gs,
                                                      const float* betas, int ld, bool l2norm,
                                                      float scale) {
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  for (int r = warp; r < C; r += Threads / 32) {
    float sq = 0, sk = 0;
    for (int c = lane; c < D; c += 32) {
      sq += Qs[r * ld + c] * Qs[r * ld + c];
      sk += Ks[r * ld + c] * Ks[r * ld + c];
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      sq += __shfl_xor_sync(0xffffffffu, sq, o);
      sk += __shfl_xor_sync(0xffffffffu, sk, o);
    }
    const float rq = (l2norm ? rsqrtf(sq + 1e-6f) : 1.f) * scale;
    const float rk = l2norm ? rsqrtf(sk + 1e-6f) : 1.f;
    for (int c = lane; c < D; c += 32) {
      Qs[r * ld + c] *= rq;
      const float kv = Ks[r * ld + c] * rk;
      Ks[r * ld + c] = kv;
      Es[r * ld + c] = (GT == Gates::kda ? betas[r] : Es[r * ld + c]) * kv;
    }
  }
  for (int c = tid; c < D; c += Threads) {
    float acc = 0;
    for (int r = 0; r < C; ++r) {
      acc += Gs[r * ld + c];
      Gs[r * ld + c] = acc;
    }
  }
}

// Whether each 16-row diagonal block of the intra-chunk products may go through its first row
// r0: its key factors e^{G_r0 - G_j} (j >= r0) reach e^{span}, span = max over channels of
// G_r0 - G_{r0 + 15}; up to 80 they and their partners e^{G_i - G_r0} >= e^{-80} stay normal
// f32/bf16 numbers. Past it (decay beyond fla's safe range) the block is computed exactly per
// channel instead. Warps 0-3 each decide one block from G (f32 rows of stride ld, `unit` per
// nat: 1, or log2 e for G in base-2 units); a __syncthreads must follow.
template <int D>
__device__ __forceinline__ void decide_through_r0(const float* Gs, int ld, bool tensor_cores,
                                                  int (&through_r0)[4], float unit = 1.f) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (warp >= 4) return;
  float span = 0;
  for (int c = lane; c < D; c += 32)
    span = fmaxf(span, Gs[16 * warp * ld + c] - Gs[(16 * warp + 15) * ld + c]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) span = fmaxf(span, __shfl_xor_sync(0xffffffffu, span, o));
  if (lane == 0) through_r0[warp] = tensor_cores && span <= 80.f * unit;
}

// W = T R1 and U = T R2 of chunk slab `at` into the workspace: T [C][ldt], R1 and R2 [C][ldr]
// bf16 in shared memory; warps 0-3 write W's 16-row blocks, warps 4-7 U's. `stage` null: each
// lane stores its fragment pairs (4 bytes); else 8 x 16 x D bf16 of shared memory that nothing
// else uses now, where each warp stages its tile (16-byte pieces XOR-swizzled by row, so the
// fragment writes and the piece reads are conflict-free) and then stores it in 16-byte pieces.
template <int D>
__device__ __forceinline__ void store_w_u(const Params& p, int64_t at, const bf16* Tb, int ldt,
                                          const bf16* R1, const bf16* R2, int ldr,
                                          bf16* stage = nullptr) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, which = warp / 4, mt = warp % 4;
  float acc[D / 8][4] = {};
  mma_rows<true, false, D / 8>(acc, Tb, ldt, 16 * mt, which ? R2 : R1, ldr, 0, C);
  bf16* out = (which ? p.ws.u : p.ws.w) + at * C * D;
  if (stage == nullptr) {
#pragma unroll
    for (int t = 0; t < D / 8; ++t)
#pragma unroll
      for (int e = 0; e < 4; e += 2) {
        const int r = acc_row(16 * mt, e), c = acc_col(8 * t, e);
        *reinterpret_cast<__nv_bfloat162*>(out + r * D + c) =
            __floats2bfloat162_rn(acc[t][e], acc[t][e + 1]);
      }
    return;
  }
  static_assert(D / 8 >= 8, "the swizzle permutes 8 pieces of a row");
  bf16* tile = stage + warp * 16 * D;  // this warp's 16 rows, D columns
  // Element (r, c) of the tile sits in piece (c / 8) ^ (r % 8) of row r.
  auto at_rc = [&](int r, int c) { return r * D + ((((c >> 3) ^ (r & 7)) << 3) | (c & 7)); };
#pragma unroll
  for (int t = 0; t < D / 8; ++t)
#pragma unroll
    for (int e = 0; e < 4; e += 2) {
      const int r = acc_row(0, e), c = acc_col(8 * t, e);
      *reinterpret_cast<__nv_bfloat162*>(tile + at_rc(r, c)) =
          __floats2bfloat162_rn(acc[t][e], acc[t][e + 1]);
    }
  __syncwarp();
  constexpr int kPieces = 16 * D / 8;  // 16-byte pieces of the tile
#pragma unroll
  for (int i = lane; i < kPieces; i += 32) {
    const int r = i / (D / 8), c = (i % (D / 8)) * 8;
    *reinterpret_cast<uint4*>(out + (16 * mt + r) * D + c) =
        *reinterpret_cast<const uint4*>(tile + at_rc(r, c));
  }
}

}  // namespace eagle::native::kda::fwd
