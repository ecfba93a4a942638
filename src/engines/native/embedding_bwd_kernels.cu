#include <cuda_runtime.h>

#include "engines/native/embedding_bwd_kernels.hpp"
#include "engines/native/launch_status.hpp"
#include "engines/native/rows.cuh"

namespace eagle::native {

namespace {

constexpr int kSortThreads = 1024;

// The workspace: offsets [vocab + 1], cursors [vocab], positions sorted by id [rows].
struct Scratch {
  int32_t *offsets, *cursors, *order;
};
__host__ __device__ inline Scratch scratch_of(int32_t* base, int64_t vocab) {
  return {base, base + vocab + 1, base + 2 * vocab + 1};
}

template <class Id>
__global__ void sort_by_id_kernel(EmbeddingBwdArgs a) {
  __shared__ int32_t totals[kSortThreads];
  const Scratch s = scratch_of(a.scratch, a.vocab);
  const Id* ids = static_cast<const Id*>(a.ids);
  const int t = threadIdx.x;
  // 1. Histogram of the ids (integer atomics: the counts do not depend on their order).
  for (int64_t v = t; v < a.vocab; v += blockDim.x) s.cursors[v] = 0;
  __syncthreads();
  for (int64_t r = t; r < a.rows; r += blockDim.x) {
    const int64_t id = static_cast<int64_t>(ids[r]);
    if (id >= 0 && id < a.vocab) atomicAdd(&s.cursors[id], 1);
  }
  __syncthreads();
  // 2. Exclusive scan into offsets: each thread a contiguous slice, the slices' totals scanned.
  const int64_t per = (a.vocab + blockDim.x - 1) / blockDim.x;
  const int64_t lo = min(a.vocab, t * per), hi = min(a.vocab, lo + per);
  int32_t sum = 0;
  for (int64_t v = lo; v < hi; ++v) sum += s.cursors[v];
  totals[t] = sum;
  __syncthreads();
  for (int off = 1; off < kSortThreads; off <<= 1) {
    const int32_t add = t >= off ? totals[t - off] : 0;
    __syncthreads();
    totals[t] += add;
    __syncthreads();
  }
  int32_t run = totals[t] - sum;
  for (int64_t v = lo; v < hi; ++v) {
    const int32_t c = s.cursors[v];
    s.offsets[v] = run;
    s.cursors[v] = run;
    run += c;
  }
  if (t == kSortThreads - 1) s.offsets[a.vocab] = totals[t];
  __syncthreads();
  // 3. Stable placement by one warp, 32 positions a step.
  if (t >= 32) return;
  const unsigned lanes_below = (1u << t) - 1u;
  for (int64_t base = 0; base < a.rows; base += 32) {
    const int64_t r = base + t;
    int64_t id = -1;
    if (r < a.rows) id = static_cast<int64_t>(ids[r]);
    const bool valid = id >= 0 && id < a.vocab;
    const unsigned active = __ballot_sync(0xffffffffu, valid);
    const unsigned peers = __match_any_sync(0xffffffffu, valid ? id : -1) & active;
    if (valid) {
      const int rank = __popc(peers & lanes_below);
      s.order[s.cursors[id] + rank] = static_cast<int32_t>(r);
    }
    __syncwarp();
    // The last of each group of equal ids moves the cursor past the group.
    if (valid && (peers >> t) == 1u) s.cursors[id] += __popc(peers);
    __syncwarp();
  }
}

// A group per table row: sums its segment of dy rows in order, writes the row once.
template <class T, int VEC>
__global__ void segment_sum_kernel(EmbeddingBwdArgs a, int group) {
  const Scratch s = scratch_of(a.scratch, a.vocab);
  const T* __restrict__ dy = static_cast<const T*>(a.dy);
  T* __restrict__ dtable = static_cast<T*>(a.dtable);
  const rows::Walk w = rows::walk(group);
  const int64_t stride = int64_t{group} * VEC, tile = stride * kCachedPacks;
  for (int64_t v = w.first; v < a.vocab; v += w.step) {
    const int32_t begin = s.offsets[v], end = s.offsets[v + 1];
    for (int64_t col0 = 0; col0 < a.dim; col0 += tile) {
      double acc[kCachedPacks][VEC] = {};  // hot ids sum thousands of rows
      for (int32_t k = begin; k < end; ++k) {
        const T* src = dy + static_cast<int64_t>(s.order[k]) * a.dim;
#pragma unroll
        for (int p = 0; p < kCachedPacks; ++p) {
          const int64_t i = col0 + int64_t{w.lane} * VEC + p * stride;
          if (i < a.dim) {
            float x[VEC];
            rows::load<T, VEC>(src, i, x);
#pragma unroll
            for (int j = 0; j < VEC; ++j) acc[p][j] += x[j];
          }
        }
      }
#pragma unroll
      for (int p = 0; p < kCachedPacks; ++p) {
        const int64_t i = col0 + int64_t{w.lane} * VEC + p * stride;
        if (i < a.dim) {
          float out[VEC];
#pragma unroll
          for (int j = 0; j < VEC; ++j) out[j] = static_cast<float>(acc[p][j]);
          rows::store<T, VEC>(dtable + v * a.dim, i, out);
        }
      }
    }
  }
}

template <class T, class Id, int VEC>
bool launch(const EmbeddingBwdArgs& a, const RowGeometry& g, void* stream) noexcept {
  const auto st = static_cast<cudaStream_t>(stream);
  sort_by_id_kernel<Id><<<1, kSortThreads, 0, st>>>(a);
  if (!launch_succeeded()) return false;
  segment_sum_kernel<T, VEC><<<g.grid, g.threads, 0, st>>>(a, g.group);
  return launch_succeeded();
}

template <class T, class Id>
EmbeddingBwdLauncher pick(const RowGeometry& g) {
  constexpr int kVec = 16 / sizeof(T);
  if (g.vec == kVec) return &launch<T, Id, kVec>;
  if (g.vec == 1) return &launch<T, Id, 1>;
  return nullptr;
}

template <class T>
EmbeddingBwdLauncher pick_id(DType ids, const RowGeometry& g) {
  if (ids == DType::i32) return pick<T, int32_t>(g);
  if (ids == DType::i64) return pick<T, int64_t>(g);
  return nullptr;
}

}  // namespace

EmbeddingBwdLauncher embedding_bwd_launcher(DType dtype, DType ids, const RowGeometry& g) {
  switch (dtype) {
    case DType::f32:
      return pick_id<float>(ids, g);
    case DType::f16:
      return pick_id<__half>(ids, g);
    case DType::bf16:
      return pick_id<__nv_bfloat16>(ids, g);
    default:
      return nullptr;
  }
}

}  // namespace eagle::native
