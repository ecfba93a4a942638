#include <cuda_runtime.h>

#include "engines/native/embedding_bwd_kernels.hpp"
#include "engines/native/launch_status.hpp"
#include "engines/native/rows.cuh"

namespace eagle::native {

namespace {

constexpr int kSortThreads = 1024;
// Ids per placing block: their cursors live in its shared memory (32 KB).
constexpr int kPlaceIds = 8192;
constexpr int kPlaceThreads = 256;

// The workspace: offsets [vocab + 1], counts [vocab], positions sorted by id [rows].
struct Scratch {
  int32_t *offsets, *counts, *order;
};
__host__ __device__ inline Scratch scratch_of(int32_t* base, int64_t vocab) {
  return {base, base + vocab + 1, base + 2 * vocab + 1};
}

// One block: the histogram of the ids and its exclusive scan, the segment offsets.
template <class Id>
__global__ void offsets_kernel(EmbeddingBwdArgs a) {
  __shared__ int32_t totals[kSortThreads];
  const Scratch s = scratch_of(a.scratch, a.vocab);
  const Id* ids = static_cast<const Id*>(a.ids);
  const int t = threadIdx.x;
  // 1. Histogram of the ids (integer atomics: the counts do not depend on their order).
  for (int64_t v = t; v < a.vocab; v += blockDim.x) s.counts[v] = 0;
  __syncthreads();
  for (int64_t r = t; r < a.rows; r += blockDim.x) {
    const int64_t id = static_cast<int64_t>(ids[r]);
    if (id >= 0 && id < a.vocab) atomicAdd(&s.counts[id], 1);
  }
  __syncthreads();
  // 2. Exclusive scan into offsets: each thread a contiguous slice, the slices' totals scanned.
  const int64_t per = (a.vocab + blockDim.x - 1) / blockDim.x;
  const int64_t lo = min(a.vocab, t * per), hi = min(a.vocab, lo + per);
  int32_t sum = 0;
  for (int64_t v = lo; v < hi; ++v) sum += s.counts[v];
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
    s.offsets[v] = run;
    run += s.counts[v];
  }
  if (t == kSortThreads - 1) s.offsets[a.vocab] = totals[t];
}

// Block b places the positions of ids [b * kPlaceIds, (b + 1) * kPlaceIds) in their segments,
// in position order: its first warp walks every id, 32 a step; __match_any_sync ranks equal
// ids inside the warp, and a cursor per id in shared memory carries the order across steps.
template <class Id>
__global__ void place_kernel(EmbeddingBwdArgs a) {
  __shared__ int32_t cursor[kPlaceIds];
  const Scratch s = scratch_of(a.scratch, a.vocab);
  const Id* ids = static_cast<const Id*>(a.ids);
  const int64_t v0 = static_cast<int64_t>(blockIdx.x) * kPlaceIds;
  const int64_t v1 = min(a.vocab, v0 + kPlaceIds);
  for (int64_t v = v0 + threadIdx.x; v < v1; v += blockDim.x) cursor[v - v0] = s.offsets[v];
  __syncthreads();
  if (threadIdx.x >= 32) return;
  const int t = threadIdx.x;
  const unsigned lanes_below = (1u << t) - 1u;
  int64_t next = t < a.rows ? static_cast<int64_t>(ids[t]) : -1;
  for (int64_t base = 0; base < a.rows; base += 32) {
    const int64_t r = base + t, id = next;
    // The next step's ids are loaded now: the loop's latency is the shared cursor's.
    next = r + 32 < a.rows ? static_cast<int64_t>(ids[r + 32]) : -1;
    const bool mine = r < a.rows && id >= v0 && id < v1;
    const unsigned peers =
        __match_any_sync(0xffffffffu, mine ? id : -1) & __ballot_sync(0xffffffffu, mine);
    if (mine) s.order[cursor[id - v0] + __popc(peers & lanes_below)] = static_cast<int32_t>(r);
    __syncwarp();
    // The last of each group of equal ids moves the cursor past the group.
    if (mine && (peers >> t) == 1u) cursor[id - v0] += __popc(peers);
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
  offsets_kernel<Id><<<1, kSortThreads, 0, st>>>(a);
  if (!launch_succeeded()) return false;
  const auto blocks = static_cast<unsigned>((a.vocab + kPlaceIds - 1) / kPlaceIds);
  place_kernel<Id><<<blocks, kPlaceThreads, 0, st>>>(a);
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
