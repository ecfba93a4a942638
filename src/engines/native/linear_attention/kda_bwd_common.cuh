// Internal, CUDA sources only: what the launches of the chunked kda / gdn2 backward
// (kda_bwd_sm90.cu, kda_bwd_dqkg.cuh) share: their parameters, the workspace slabs between them
// and the chunk task of a flat index.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "eagle/ragged/schedule.hpp"
#include "engines/native/linear_attention/kda_kernels.hpp"
#include "engines/native/linear_attention/kda_mma.cuh"
#include "engines/native/linear_attention/persistent.cuh"

namespace eagle::native::kda::bwd {

constexpr int C = kChunk;
constexpr int kQkgThreads = 512;  // the dqkg launch's CTA

// What the backward launches pass between them. Per (flat chunk, value head) slab: dh [D, D]
// bf16 (the gradient of the state after the chunk), dvn [C, D] bf16 (dv'), dqg, dkl, dbg
// [C, D] f32 (the gradients of q~ e^G, k~ e^{G_last - G}, bk e^G), dm, da [C, C] f32 (of Aqk and
// A, masked), dgl [D] f32 (d e^{G_last} . e^{G_last}), dbv [C] f32 (kda: sum_v d(w v) v). Per
// (row, value head): pq, pk [D] f32 (the gradients of q~ and k~ through that value head).
struct BwdScratch {
  bf16 *dh, *dvn;
  float *dqg, *dkl, *dbg, *dm, *da, *dgl, *dbv, *pq, *pk;
};

struct Params {
  Shape s;
  const void *q, *k, *v;
  const float *g, *beta, *b, *w;
  const void* d_o;
  const float* dht;
  void *dq, *dk, *dv;
  float *dg, *dbeta, *db, *dw, *dh0;
  const int32_t* offsets;
  ChunkViews f;
  BwdScratch ws;
  int64_t cap = 0;          // G_cap: the chunk tasks a flat grid covers
  int multiprocessors = 0;  // the device's, for the split dstate rows' balanced share (rows_split)
};

__device__ __forceinline__ ragged::ChunkTask chunk_of(const Params& p, int64_t j) {
  return ragged::chunk_task(p.s.cu, p.offsets, p.s.slots, p.s.rows, C, j);
}

__device__ __forceinline__ const bf16* view(const void* base, int64_t at, int64_t elems) {
  return static_cast<const bf16*>(base) + at * elems;
}

}  // namespace eagle::native::kda::bwd
