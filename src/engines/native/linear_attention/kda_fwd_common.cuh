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
  int64_t cap = 0;  // G_cap: the chunk tasks a flat grid covers
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

}  // namespace eagle::native::kda::fwd
