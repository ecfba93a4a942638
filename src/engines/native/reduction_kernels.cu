#include <cmath>
#include <type_traits>

#include "engines/native/dtype_dispatch.cuh"
#include "engines/native/launch_status.hpp"
#include "engines/native/reduction_kernels.hpp"
#include "engines/native/rows.cuh"

namespace eagle::native {

namespace {

// Packs a thread loads before folding any (16-byte loads in flight per thread).
constexpr int kUnroll = 4;

// How mode M folds. Part: what a thread folds a few elements into; Acc: its running value, and
// what threads combine (partials in the workspace are doubles whatever Acc is).
template <ReduceMode M>
struct Fold {
  static constexpr bool kSelects =
      M == ReduceMode::max || M == ReduceMode::min || M == ReduceMode::amax;
  static constexpr bool kWide = M == ReduceMode::prod || M == ReduceMode::l2;
  using Part = std::conditional_t<kWide, double, float>;
  using Acc = std::conditional_t<kSelects, float, double>;

  template <class V>
  __device__ static V identity() {
    if constexpr (M == ReduceMode::max) return static_cast<V>(-INFINITY);
    if constexpr (M == ReduceMode::min) return static_cast<V>(INFINITY);
    if constexpr (M == ReduceMode::prod) return V(1);
    return V(0);  // sum, mean, l2, amax (|x| >= 0)
  }
  // The value before folding: x, x^2 (in double), |x|.
  __device__ static Part pre(float x) {
    if constexpr (M == ReduceMode::l2) return static_cast<double>(x) * static_cast<double>(x);
    if constexpr (M == ReduceMode::amax) return fabsf(x);
    return x;
  }
  // NaN propagates through max and min (the reference's max_nan, min_nan).
  template <class V>
  __device__ static V combine(V a, V b) {
    if constexpr (kSelects) {
      const V m = (M == ReduceMode::min) ? fmin(a, b) : fmax(a, b);
      return (a != a || b != b) ? a + b : m;
    } else if constexpr (M == ReduceMode::prod) {
      return a * b;
    } else {
      return a + b;
    }
  }
  __device__ static double finish(double acc, int64_t n) {
    if constexpr (M == ReduceMode::mean) return n == 0 ? NAN : acc / static_cast<double>(n);
    if constexpr (M == ReduceMode::l2) return sqrt(acc);
    return acc;
  }
  // p[0] o p[1] o ... o p[N-1] as a pairwise tree (short dependency chains, fewer roundings).
  template <int N>
  __device__ static Part tree(Part (&p)[N]) {
    static_assert((N & (N - 1)) == 0, "a power of two");
#pragma unroll
    for (int w = N / 2; w >= 1; w /= 2)
#pragma unroll
      for (int j = 0; j < w; ++j) p[j] = combine(p[j], p[j + w]);
    return p[0];
  }
  // The fold of a pack of N loaded elements.
  template <int N>
  __device__ static Part pack(const float (&v)[N]) {
    Part p[N];
#pragma unroll
    for (int j = 0; j < N; ++j) p[j] = pre(v[j]);
    return tree(p);
  }
};

template <class T>
__device__ __forceinline__ T to_output(double v) {
  return detail::from_acc<T>(static_cast<float>(v));
}

// Every kernel of a mode family takes a ReduceMode template parameter; `dispatch` picks the
// instance for a runtime mode once per launch.
template <template <ReduceMode> class Launch, class... Args>
bool dispatch(ReduceMode mode, Args&&... args) {
  switch (mode) {
    case ReduceMode::sum:
      return Launch<ReduceMode::sum>::run(args...);
    case ReduceMode::mean:
      return Launch<ReduceMode::mean>::run(args...);
    case ReduceMode::max:
      return Launch<ReduceMode::max>::run(args...);
    case ReduceMode::min:
      return Launch<ReduceMode::min>::run(args...);
    case ReduceMode::prod:
      return Launch<ReduceMode::prod>::run(args...);
    case ReduceMode::l2:
      return Launch<ReduceMode::l2>::run(args...);
    case ReduceMode::amax:
      return Launch<ReduceMode::amax>::run(args...);
  }
  return false;
}

// ---- rows ----------------------------------------------------------------------------------

// A group (warp or block, g.group) per piece: piece p is chunk p % splits of row p / splits.
template <class T, int VEC, ReduceMode M>
__global__ void __launch_bounds__(kReduceThreads, kReduceBlocksPerSm)
    row_reduce_kernel(RowReduceArgs a, int group) {
  using F = Fold<M>;
  using Acc = typename F::Acc;
  using Part = typename F::Part;
  __shared__ Acc scratch[32];
  const T* __restrict__ x = static_cast<const T*>(a.x);
  const rows::Walk w = rows::walk(group);
  const int64_t pieces = a.rows * a.splits, stride = int64_t{group} * VEC;
  for (int64_t p = w.first; p < pieces; p += w.step) {
    const int64_t row = p / a.splits, split = p % a.splits;
    const int64_t begin = split * a.chunk;
    const int64_t end = min(a.len, begin + a.chunk);
    const T* xr = x + row * a.len;
    Acc acc = F::template identity<Acc>();
    int64_t i = begin + int64_t{w.lane} * VEC;
    // kUnroll packs loaded before any is folded; their folds meet in float, then once in Acc.
    for (; i + (kUnroll - 1) * stride < end; i += kUnroll * stride) {
      float v[kUnroll][VEC];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) rows::load<T, VEC>(xr, i + u * stride, v[u]);
      Part part[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) part[u] = F::pack(v[u]);
      acc = F::combine(acc, static_cast<Acc>(F::tree(part)));
    }
    for (; i < end; i += stride) {
      float v[VEC];
      rows::load<T, VEC>(xr, i, v);
      acc = F::combine(acc, static_cast<Acc>(F::pack(v)));
    }
    acc = rows::group_reduce(
        acc, [](Acc l, Acc r) { return F::combine(l, r); }, scratch, group);
    if (w.lane != 0) continue;
    if (a.splits == 1)
      static_cast<T*>(a.y)[row] = to_output<T>(F::finish(acc, a.len));
    else
      a.partials[p] = acc;
  }
}

// Each row's partials combined by a group (a warp, or the block for many splits): lane l takes
// splits l, l + group, ... in order, then the group's fixed tree. The same bits every run.
template <class T, ReduceMode M>
__global__ void __launch_bounds__(kReduceThreads) combine_rows_kernel(RowReduceArgs a, int group) {
  using F = Fold<M>;
  __shared__ double scratch[32];
  const rows::Walk w = rows::walk(group);
  for (int64_t row = w.first; row < a.rows; row += w.step) {
    const double* part = a.partials + row * a.splits;
    double acc = F::template identity<double>();
#pragma unroll 4
    for (int64_t k = w.lane; k < a.splits; k += group) acc = F::combine(acc, part[k]);
    acc = rows::group_reduce(
        acc, [](double l, double r) { return F::combine(l, r); }, scratch, group);
    if (w.lane == 0) static_cast<T*>(a.y)[row] = to_output<T>(F::finish(acc, a.len));
  }
}

template <class T, int VEC>
struct RowLaunch {
  template <ReduceMode M>
  struct Mode {
    static bool run(const RowReduceArgs& a, const RowGeometry& g, cudaStream_t s) {
      row_reduce_kernel<T, VEC, M><<<g.grid, g.threads, 0, s>>>(a, g.group);
      if (!launch_succeeded()) return false;
      if (a.splits == 1) return true;
      // A block per row once a warp would take more than 8 partials a lane.
      const int group = a.splits > 32 * 8 ? kReduceThreads : 32;
      const unsigned blocks = rows::one_row_per_group_grid(a.rows, kReduceThreads, group);
      combine_rows_kernel<T, M><<<blocks, kReduceThreads, 0, s>>>(a, group);
      return launch_succeeded();
    }
  };
};

template <class T, int VEC>
bool launch_rows(const RowReduceArgs& a, const RowGeometry& g, void* stream) noexcept {
  return dispatch<RowLaunch<T, VEC>::template Mode>(a.mode, a, g,
                                                    static_cast<cudaStream_t>(stream));
}

// ---- columns -------------------------------------------------------------------------------

// Tile t of a launch: the columns tile t % col_tiles, chunk (t / col_tiles) % splits of count,
// outer index t / (col_tiles * splits). Thread (tx, ty) folds pack column tx of rows ty,
// ty + tile_y, ... of the chunk into VEC accumulators; a fixed tree over ty in shared memory
// combines the block's rows of threads.
template <class T, int VEC, ReduceMode M>
__global__ void __launch_bounds__(kReduceThreads, kReduceBlocksPerSm)
    column_reduce_kernel(ColumnReduceArgs a) {
  using F = Fold<M>;
  using Acc = typename F::Acc;
  using Part = typename F::Part;
  __shared__ Acc tree[VEC][kReduceThreads];
  const T* __restrict__ x = static_cast<const T*>(a.x);
  const int tx = static_cast<int>(threadIdx.x) % a.tile_x;
  const int ty = static_cast<int>(threadIdx.x) / a.tile_x;
  const int64_t col_tiles = ((a.inner + VEC - 1) / VEC + a.tile_x - 1) / a.tile_x;
  const int64_t tiles = a.outer * a.splits * col_tiles, outputs = a.outer * a.inner;
  const int64_t row_step = a.tile_y;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t col = ((t % col_tiles) * a.tile_x + tx) * VEC;
    const int64_t split = (t / col_tiles) % a.splits, o = t / (col_tiles * a.splits);
    const bool active = col < a.inner;  // VEC > 1: inner is a multiple of VEC
    const int64_t begin = split * a.chunk, end = min(a.count, begin + a.chunk);
    const T* xc = x + o * a.count * a.inner + col;
    Acc acc[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j) acc[j] = F::template identity<Acc>();
    if (active) {
      int64_t r = begin + ty;
      for (; r + (kUnroll - 1) * row_step < end; r += kUnroll * row_step) {
        float v[kUnroll][VEC];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u)
          rows::load<T, VEC>(xc, (r + u * row_step) * a.inner, v[u]);
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          Part part[kUnroll];
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) part[u] = F::pre(v[u][j]);
          acc[j] = F::combine(acc[j], static_cast<Acc>(F::tree(part)));
        }
      }
      for (; r < end; r += row_step) {
        float v[VEC];
        rows::load<T, VEC>(xc, r * a.inner, v);
#pragma unroll
        for (int j = 0; j < VEC; ++j) acc[j] = F::combine(acc[j], static_cast<Acc>(F::pre(v[j])));
      }
    }
    // Rows of threads ty < s take in row ty + s, halving s: the same order every run. Each step
    // reads rows [s, 2s) and writes rows [0, s), a barrier between steps.
#pragma unroll
    for (int j = 0; j < VEC; ++j) tree[j][threadIdx.x] = acc[j];
    __syncthreads();
    for (int s = a.tile_y / 2; s > 0; s /= 2) {
      if (ty < s) {
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          acc[j] = F::combine(acc[j], tree[j][threadIdx.x + s * a.tile_x]);
          tree[j][threadIdx.x] = acc[j];
        }
      }
      __syncthreads();
    }
    if (ty != 0 || !active) continue;
    const int64_t out = o * a.inner + col;
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      if (a.splits == 1)
        static_cast<T*>(a.y)[out + j] = to_output<T>(F::finish(acc[j], a.count));
      else
        a.partials[split * outputs + out + j] = acc[j];
    }
  }
}

// Output o's partials [splits, outputs] folded in chunk order by one thread (coalesced over o).
template <class T, ReduceMode M>
__global__ void combine_splits_kernel(const double* __restrict__ partials, void* y, int64_t outputs,
                                      int64_t splits, int64_t count) {
  using F = Fold<M>;
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < outputs;
       o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    double acc = F::template identity<double>();
#pragma unroll 8
    for (int64_t s = 0; s < splits; ++s) acc = F::combine(acc, partials[s * outputs + o]);
    static_cast<T*>(y)[o] = to_output<T>(F::finish(acc, count));
  }
}

template <class T, ReduceMode M>
bool launch_combine_splits(const double* partials, void* y, int64_t outputs, int64_t splits,
                           int64_t count, cudaStream_t s) {
  const auto blocks = static_cast<unsigned>(std::min<int64_t>((outputs + 255) / 256, 4096));
  combine_splits_kernel<T, M><<<blocks, 256, 0, s>>>(partials, y, outputs, splits, count);
  return launch_succeeded();
}

template <class T, int VEC>
struct ColumnLaunch {
  template <ReduceMode M>
  struct Mode {
    static bool run(const ColumnReduceArgs& a, unsigned grid, cudaStream_t s) {
      column_reduce_kernel<T, VEC, M><<<grid, kReduceThreads, 0, s>>>(a);
      if (!launch_succeeded()) return false;
      if (a.splits == 1) return true;
      return launch_combine_splits<T, M>(a.partials, a.y, a.outer * a.inner, a.splits, a.count, s);
    }
  };
};

template <class T, int VEC>
bool launch_columns(const ColumnReduceArgs& a, unsigned grid, void* stream) noexcept {
  return dispatch<ColumnLaunch<T, VEC>::template Mode>(a.mode, a, grid,
                                                       static_cast<cudaStream_t>(stream));
}

// ---- strided (any other axes) --------------------------------------------------------------

// Thread t takes output t % outputs and chunk t / outputs of its reduced elements (consecutive
// threads, consecutive outputs).
template <class T, ReduceMode M>
__global__ void strided_reduce_kernel(StridedReduceArgs a) {
  using F = Fold<M>;
  const T* __restrict__ x = static_cast<const T*>(a.x);
  const int64_t pieces = a.outputs * a.splits;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < pieces;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t o = t % a.outputs, split = t / a.outputs;
    int64_t base = 0, rest = o;
    for (int k = a.kept_runs - 1; k >= 0; --k) {
      base += (rest % a.kept_size[k]) * a.kept_stride[k];
      rest /= a.kept_size[k];
    }
    const int64_t begin = split * a.chunk, end = min(a.count, begin + a.chunk);
    double acc = F::template identity<double>();
    for (int64_t j = begin; j < end; ++j) {
      int64_t off = base, r = j;
      for (int k = a.reduced_runs - 1; k >= 0; --k) {
        off += (r % a.reduced_size[k]) * a.reduced_stride[k];
        r /= a.reduced_size[k];
      }
      acc = F::combine(acc, static_cast<double>(F::pre(detail::to_acc(x[off]))));
    }
    if (a.splits == 1)
      static_cast<T*>(a.y)[o] = to_output<T>(F::finish(acc, a.count));
    else
      a.partials[t] = acc;
  }
}

template <class T>
struct StridedLaunch {
  template <ReduceMode M>
  struct Mode {
    static bool run(const StridedReduceArgs& a, unsigned grid, unsigned threads, cudaStream_t s) {
      strided_reduce_kernel<T, M><<<grid, threads, 0, s>>>(a);
      if (!launch_succeeded()) return false;
      if (a.splits == 1) return true;
      return launch_combine_splits<T, M>(a.partials, a.y, a.outputs, a.splits, a.count, s);
    }
  };
};

template <class T>
bool launch_strided(const StridedReduceArgs& a, unsigned grid, unsigned threads,
                    void* stream) noexcept {
  return dispatch<StridedLaunch<T>::template Mode>(a.mode, a, grid, threads,
                                                   static_cast<cudaStream_t>(stream));
}

template <class T>
RowReduceLauncher pick_rows(int vec) {
  constexpr int kVec = 16 / sizeof(T);
  if (vec == kVec) return &launch_rows<T, kVec>;
  if (vec == 1) return &launch_rows<T, 1>;
  return nullptr;
}

template <class T>
ColumnReduceLauncher pick_columns(int vec) {
  constexpr int kVec = 16 / sizeof(T);
  if (vec == kVec) return &launch_columns<T, kVec>;
  if (vec == 1) return &launch_columns<T, 1>;
  return nullptr;
}

}  // namespace

RowReduceLauncher row_reduce_launcher(DType dtype, const RowGeometry& g) {
  return by_float_dtype(dtype, [&]<class T>() { return pick_rows<T>(g.vec); });
}

ColumnReduceLauncher column_reduce_launcher(DType dtype, int vec) {
  return by_float_dtype(dtype, [&]<class T>() { return pick_columns<T>(vec); });
}

StridedReduceLauncher strided_reduce_launcher(DType dtype) {
  return by_float_dtype(dtype, [&]<class T>() { return &launch_strided<T>; });
}

}  // namespace eagle::native
