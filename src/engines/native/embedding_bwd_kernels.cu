#include <cuda_runtime.h>

#include <algorithm>

#include "engines/native/dtype_dispatch.cuh"
#include "engines/native/embedding_bwd_kernels.hpp"
#include "engines/native/launch_status.hpp"
#include "engines/native/rows.cuh"
#include "kernel/block_scan.cuh"

namespace eagle::native {

namespace {

constexpr int kCountThreads = 256;  // per chunk block and per bucket block
constexpr int kPlaceThreads = 128;  // per chunk placing block (one warp walks)
constexpr int kScanThreads = 1024;  // the one block scanning the bucket x chunk counts
constexpr int kRowThreads = 256;    // the row kernel: a warp per (table row, column chunk)
constexpr int kRowWarps = kRowThreads / 32;
// Packs a lane has in flight while summing a segment: 128 bytes, or 64 where a pack holds 8
// values (their 8 double sums take the registers; ptxas: no spills at 3 blocks per SM).
template <int VEC>
constexpr int kSumLoads = VEC >= 8 ? 4 : 8;
constexpr int64_t kRowBlocksMax = int64_t{1} << 20;  // the row kernel's grid strides past this

// The workspace (embedding_bwd_workspace): offsets [vocab + 1], positions sorted by id [rows],
// positions sorted by bucket [rows], counts [buckets * chunks] (bucket-major) and their
// exclusive scan [buckets * chunks + 1].
struct Scratch {
  int32_t *offsets, *order, *by_bucket, *counts, *starts;
};
__host__ __device__ inline Scratch scratch_of(int32_t* base, int64_t vocab, int64_t rows,
                                              int64_t cells) {
  Scratch s{};
  s.offsets = base;
  s.order = s.offsets + vocab + 1;
  s.by_bucket = s.order + rows;
  s.counts = s.by_bucket + rows;
  s.starts = s.counts + cells;
  return s;
}

struct Sort {
  EmbeddingBwdArgs a;
  EmbeddingSortShape shape;
  Scratch s;
};

template <class Id>
__device__ __forceinline__ int64_t id_at(const EmbeddingBwdArgs& a, int64_t r) {
  return static_cast<int64_t>(static_cast<const Id*>(a.ids)[r]);
}

// 1. Block c counts the ids of positions [c * chunk, (c + 1) * chunk) per bucket.
template <class Id>
__global__ void __launch_bounds__(kCountThreads) bucket_count_kernel(Sort k) {
  extern __shared__ int32_t hist[];  // [buckets]
  const int64_t buckets = k.shape.buckets, c = blockIdx.x;
  for (int64_t b = threadIdx.x; b < buckets; b += blockDim.x) hist[b] = 0;
  __syncthreads();
  const int64_t r0 = c * k.shape.chunk, r1 = min(k.a.rows, r0 + k.shape.chunk);
  for (int64_t r = r0 + threadIdx.x; r < r1; r += blockDim.x) {
    const int64_t id = id_at<Id>(k.a, r);
    // Integer atomics: the counts do not depend on their order.
    if (id >= 0 && id < k.a.vocab) atomicAdd(&hist[id / k.shape.bucket_ids], 1);
  }
  __syncthreads();
  for (int64_t b = threadIdx.x; b < buckets; b += blockDim.x)
    k.s.counts[b * k.shape.chunks + c] = hist[b];
}

// 2. One block: the exclusive scan of the counts, bucket-major, so bucket b's positions from
// chunk c start at starts[b * chunks + c]; starts[cells] is the number of ids in range.
__global__ void __launch_bounds__(kScanThreads) bucket_scan_kernel(Sort k) {
  __shared__ int32_t scratch[32];
  const int64_t cells = k.shape.buckets * k.shape.chunks;
  const int64_t per = (cells + blockDim.x - 1) / blockDim.x;
  const int64_t lo = min(cells, threadIdx.x * per), hi = min(cells, lo + per);
  int32_t sum = 0;
  for (int64_t i = lo; i < hi; ++i) sum += k.s.counts[i];
  int32_t total = 0;
  int32_t run = block_scan::block_exclusive(sum, scratch, &total);
  for (int64_t i = lo; i < hi; ++i) {
    const int32_t n = k.s.counts[i];
    k.s.starts[i] = run;
    run += n;
  }
  if (threadIdx.x == 0) k.s.starts[cells] = total;
}

// One warp places positions [r0, r1) in order: key(r) is the slot's index in `cursor` or -1 to
// skip r; __match_any_sync ranks equal keys inside the warp and the last lane of each group of
// equal keys moves the cursor past the group, so equal keys keep their position order.
template <class KeyOf, class PosOf>
__device__ __forceinline__ void warp_place(int64_t r0, int64_t r1, int32_t* cursor, int32_t* out,
                                           KeyOf key_of, PosOf pos_of) {
  const int lane = static_cast<int>(threadIdx.x & 31);
  const unsigned lanes_below = (1u << lane) - 1u;
  int key_next = r0 + lane < r1 ? key_of(r0 + lane) : -1;
  for (int64_t base = r0; base < r1; base += 32) {
    const int64_t r = base + lane;
    const int key = key_next;
    // The next step's keys are loaded now: the loop's latency is the shared cursor's.
    key_next = r + 32 < r1 ? key_of(r + 32) : -1;
    const bool mine = key >= 0;
    const unsigned peers = __match_any_sync(0xffffffffu, key) & __ballot_sync(0xffffffffu, mine);
    if (mine) out[cursor[key] + __popc(peers & lanes_below)] = pos_of(r);
    __syncwarp();
    if (mine && (peers >> lane) == 1u) cursor[key] += __popc(peers);
    __syncwarp();
  }
}

// 3. Block c places its chunk's positions by bucket, in position order.
template <class Id>
__global__ void __launch_bounds__(kPlaceThreads) bucket_place_kernel(Sort k) {
  extern __shared__ int32_t cursor[];  // [buckets]
  const int64_t buckets = k.shape.buckets, c = blockIdx.x;
  for (int64_t b = threadIdx.x; b < buckets; b += blockDim.x)
    cursor[b] = k.s.starts[b * k.shape.chunks + c];
  __syncthreads();
  if (threadIdx.x >= 32) return;
  const int64_t r0 = c * k.shape.chunk, r1 = min(k.a.rows, r0 + k.shape.chunk);
  const int64_t vocab = k.a.vocab, bucket_ids = k.shape.bucket_ids;
  warp_place(
      r0, r1, cursor, k.s.by_bucket,
      [&](int64_t r) {
        const int64_t id = id_at<Id>(k.a, r);
        return id >= 0 && id < vocab ? static_cast<int>(id / bucket_ids) : -1;
      },
      [](int64_t r) { return static_cast<int32_t>(r); });
}

// 4. Block b sorts bucket b's positions by id: counts its ids, writes their segment offsets,
// places the positions (already in position order) by id.
template <class Id>
__global__ void __launch_bounds__(kCountThreads) id_place_kernel(Sort k) {
  extern __shared__ int32_t cursor[];  // [bucket_ids]
  __shared__ int32_t scratch[32];
  const int64_t b = blockIdx.x, lo = b * k.shape.bucket_ids;
  const int64_t n_ids = min(k.a.vocab, lo + k.shape.bucket_ids) - lo;
  const int64_t begin = k.s.starts[b * k.shape.chunks];
  const int64_t end = k.s.starts[(b + 1) * k.shape.chunks];
  for (int64_t i = threadIdx.x; i < n_ids; i += blockDim.x) cursor[i] = 0;
  __syncthreads();
  for (int64_t e = begin + threadIdx.x; e < end; e += blockDim.x)
    atomicAdd(&cursor[id_at<Id>(k.a, k.s.by_bucket[e]) - lo], 1);
  __syncthreads();
  // Each thread scans a contiguous slice of the ids; the slices' sums are scanned by the block.
  const int64_t per = (n_ids + blockDim.x - 1) / blockDim.x;
  const int64_t i0 = min(n_ids, threadIdx.x * per), i1 = min(n_ids, i0 + per);
  int32_t sum = 0;
  for (int64_t i = i0; i < i1; ++i) sum += cursor[i];
  int32_t total = 0;
  int32_t run = static_cast<int32_t>(begin) + block_scan::block_exclusive(sum, scratch, &total);
  for (int64_t i = i0; i < i1; ++i) {
    const int32_t n = cursor[i];
    k.s.offsets[lo + i] = run;
    cursor[i] = run;
    run += n;
  }
  if (b == k.shape.buckets - 1 && threadIdx.x == 0)
    k.s.offsets[k.a.vocab] = static_cast<int32_t>(end);
  __syncthreads();
  if (threadIdx.x >= 32) return;
  const int32_t* by_bucket = k.s.by_bucket;
  warp_place(
      begin, end, cursor, k.s.order,
      [&](int64_t e) { return static_cast<int>(id_at<Id>(k.a, by_bucket[e]) - lo); },
      [&](int64_t e) { return by_bucket[e]; });
}

// 5. A warp per (table row, chunk of 32 * VEC columns) writes its part of the row once: zeros,
// a copy of its one dy row, or the sum of its segment's dy rows in position order (double,
// rounded once). Splitting the columns over warps keeps a hot id (byte tokens: a space can be a
// quarter of the batch) from serializing its thousands of rows on one warp; each element's sum
// runs in the same order as before, so the bits do not depend on the split.
template <class T, int VEC>
__global__ void __launch_bounds__(kRowThreads, 3) row_kernel(EmbeddingBwdArgs a, Scratch s) {
  using Pack = rows::Pack<T, VEC>;
  const int lane = static_cast<int>(threadIdx.x & 31);
  const T* __restrict__ dy = static_cast<const T*>(a.dy);
  const int64_t dim = a.dim, width = int64_t{32} * VEC;
  const int64_t chunks = (dim + width - 1) / width;
  const int64_t warps = a.vocab * chunks;
  for (int64_t w = static_cast<int64_t>(blockIdx.x) * kRowWarps + (threadIdx.x >> 5); w < warps;
       w += static_cast<int64_t>(gridDim.x) * kRowWarps) {
    const int64_t v = w / chunks;
    const int64_t i = (w % chunks) * width + int64_t{lane} * VEC;
    if (i >= dim) continue;
    T* __restrict__ out = static_cast<T*>(a.dtable) + v * dim;
    const int32_t begin = s.offsets[v], end = s.offsets[v + 1];
    if (end - begin <= 1) {  // zeros, or the sum of one row: the row, copied bit for bit
      Pack p;
      if (end == begin) {
#pragma unroll
        for (int j = 0; j < VEC; ++j) p.v[j] = detail::from_acc<T>(0.0f);
      } else {
        p = *reinterpret_cast<const Pack*>(dy + static_cast<int64_t>(s.order[begin]) * dim + i);
      }
      *reinterpret_cast<Pack*>(out + i) = p;
      continue;
    }
    double acc[VEC] = {};  // hot ids sum thousands of rows
    for (int32_t k0 = begin; k0 < end; k0 += kSumLoads<VEC>) {
      Pack p[kSumLoads<VEC>];  // kept packed (16 bytes each) until added
#pragma unroll
      for (int u = 0; u < kSumLoads<VEC>; ++u)
        if (k0 + u < end)
          p[u] =
              *reinterpret_cast<const Pack*>(dy + static_cast<int64_t>(s.order[k0 + u]) * dim + i);
#pragma unroll
      for (int u = 0; u < kSumLoads<VEC>; ++u)
        if (k0 + u < end)
#pragma unroll
          for (int j = 0; j < VEC; ++j) acc[j] += static_cast<double>(detail::to_acc(p[u].v[j]));
    }
    float o[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j) o[j] = static_cast<float>(acc[j]);
    rows::store<T, VEC>(out, i, o);
  }
}

template <class T, class Id, int VEC>
bool launch(const EmbeddingBwdArgs& a, const RowGeometry&, void* stream) noexcept {
  const auto st = static_cast<cudaStream_t>(stream);
  Sort k{a, embedding_sort_shape(a.vocab, a.rows), {}};
  const int64_t cells = k.shape.buckets * k.shape.chunks;
  k.s = scratch_of(a.scratch, a.vocab, a.rows, cells);
  const auto chunks = static_cast<unsigned>(k.shape.chunks);
  const auto buckets = static_cast<unsigned>(k.shape.buckets);
  const std::size_t bucket_smem = static_cast<std::size_t>(k.shape.buckets) * sizeof(int32_t);
  const std::size_t id_smem = static_cast<std::size_t>(k.shape.bucket_ids) * sizeof(int32_t);
  bucket_count_kernel<Id><<<chunks, kCountThreads, bucket_smem, st>>>(k);
  if (!launch_succeeded()) return false;
  bucket_scan_kernel<<<1, kScanThreads, 0, st>>>(k);
  if (!launch_succeeded()) return false;
  bucket_place_kernel<Id><<<chunks, kPlaceThreads, bucket_smem, st>>>(k);
  if (!launch_succeeded()) return false;
  id_place_kernel<Id><<<buckets, kCountThreads, id_smem, st>>>(k);
  if (!launch_succeeded()) return false;
  const int64_t width = int64_t{32} * VEC;
  const int64_t warps = a.vocab * ((a.dim + width - 1) / width);
  const auto blocks =
      static_cast<unsigned>(std::min((warps + kRowWarps - 1) / kRowWarps, kRowBlocksMax));
  row_kernel<T, VEC><<<blocks, kRowThreads, 0, st>>>(a, k.s);
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
  return by_float_dtype(dtype, [&]<class T>() { return pick_id<T>(ids, g); });
}

}  // namespace eagle::native
