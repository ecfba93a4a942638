#include <cmath>

#include "engines/native/launch_status.hpp"
#include "engines/native/reduction_kernels.hpp"
#include "engines/native/rows.cuh"

namespace eagle::native {

namespace {

// How a mode folds: the value before folding (x, x^2, |x|), the fold, its start, its finish.
struct Fold {
  ReduceMode mode;
  __device__ double init() const {
    switch (mode) {
      case ReduceMode::max:
        return -INFINITY;
      case ReduceMode::min:
        return INFINITY;
      case ReduceMode::prod:
        return 1.0;
      default:
        return 0.0;
    }
  }
  __device__ double pre(double x) const {
    return mode == ReduceMode::l2 ? x * x : mode == ReduceMode::amax ? fabs(x) : x;
  }
  // NaN propagates through max and min (the reference's max_nan, min_nan).
  __device__ double operator()(double a, double b) const {
    switch (mode) {
      case ReduceMode::max:
      case ReduceMode::amax:
        return (a != a || b != b) ? a + b : fmax(a, b);
      case ReduceMode::min:
        return (a != a || b != b) ? a + b : fmin(a, b);
      case ReduceMode::prod:
        return a * b;
      default:
        return a + b;
    }
  }
  __device__ double finish(double acc, int64_t n) const {
    if (mode == ReduceMode::mean) return n == 0 ? NAN : acc / static_cast<double>(n);
    if (mode == ReduceMode::l2) return sqrt(acc);
    return acc;
  }
};

template <class T>
__device__ __forceinline__ T to_output(double v) {
  return detail::from_acc<T>(static_cast<float>(v));
}

template <class T, int VEC>
__global__ void row_reduce_kernel(RowReduceArgs a, int group) {
  __shared__ double scratch[32];
  const Fold fold{a.mode};
  const T* __restrict__ x = static_cast<const T*>(a.x);
  const rows::Walk w = rows::walk(group);
  const int64_t pieces = a.rows * a.splits, stride = int64_t{group} * VEC;
  for (int64_t p = w.first; p < pieces; p += w.step) {
    const int64_t row = p / a.splits, split = p % a.splits;
    const int64_t begin = split * a.chunk;
    const int64_t end = min(a.len, begin + a.chunk);
    const T* xr = x + row * a.len;
    double acc = fold.init();
    for (int64_t i = begin + int64_t{w.lane} * VEC; i < end; i += stride) {
      float v[VEC];
      rows::load<T, VEC>(xr, i, v);
#pragma unroll
      for (int j = 0; j < VEC; ++j) acc = fold(acc, fold.pre(v[j]));
    }
    acc = rows::group_reduce(acc, fold, scratch, group);
    if (w.lane != 0) continue;
    if (a.splits == 1)
      static_cast<T*>(a.y)[row] = to_output<T>(fold.finish(acc, a.len));
    else
      a.partials[p] = acc;
  }
}

// Combines each row's partials in split order: the same sum whatever the schedule.
template <class T>
__global__ void combine_partials_kernel(RowReduceArgs a) {
  const Fold fold{a.mode};
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; row < a.rows;
       row += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    double acc = fold.init();
    for (int64_t s = 0; s < a.splits; ++s) acc = fold(acc, a.partials[row * a.splits + s]);
    static_cast<T*>(a.y)[row] = to_output<T>(fold.finish(acc, a.len));
  }
}

// Thread t takes output t % outputs and chunk t / outputs of its reduced elements (consecutive
// threads, consecutive outputs: coalesced when the kept axes are the inner ones).
template <class T>
__global__ void strided_reduce_kernel(StridedReduceArgs a) {
  const Fold fold{a.mode};
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
    double acc = fold.init();
    if (a.reduced_runs == 1) {
      const int64_t s = a.reduced_stride[0];
      for (int64_t j = begin; j < end; ++j)
        acc = fold(acc, fold.pre(detail::to_acc(x[base + j * s])));
    } else {
      for (int64_t j = begin; j < end; ++j) {
        int64_t off = base, r = j;
        for (int k = a.reduced_runs - 1; k >= 0; --k) {
          off += (r % a.reduced_size[k]) * a.reduced_stride[k];
          r /= a.reduced_size[k];
        }
        acc = fold(acc, fold.pre(detail::to_acc(x[off])));
      }
    }
    if (a.splits == 1)
      static_cast<T*>(a.y)[o] = to_output<T>(fold.finish(acc, a.count));
    else
      a.partials[t] = acc;
  }
}

template <class T>
__global__ void combine_strided_kernel(StridedReduceArgs a) {
  const Fold fold{a.mode};
  for (int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; o < a.outputs;
       o += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    double acc = fold.init();
    for (int64_t s = 0; s < a.splits; ++s) acc = fold(acc, a.partials[s * a.outputs + o]);
    static_cast<T*>(a.y)[o] = to_output<T>(fold.finish(acc, a.count));
  }
}

template <class T, int VEC>
bool launch_rows(const RowReduceArgs& a, const RowGeometry& g, void* stream) noexcept {
  const auto s = static_cast<cudaStream_t>(stream);
  row_reduce_kernel<T, VEC><<<g.grid, g.threads, 0, s>>>(a, g.group);
  if (!launch_succeeded()) return false;
  if (a.splits == 1) return true;
  const auto blocks = static_cast<unsigned>(std::min<int64_t>((a.rows + 255) / 256, 1024));
  combine_partials_kernel<T><<<blocks, 256, 0, s>>>(a);
  return launch_succeeded();
}

template <class T>
bool launch_strided(const StridedReduceArgs& a, unsigned grid, unsigned threads,
                    void* stream) noexcept {
  const auto s = static_cast<cudaStream_t>(stream);
  strided_reduce_kernel<T><<<grid, threads, 0, s>>>(a);
  if (!launch_succeeded()) return false;
  if (a.splits == 1) return true;
  const auto blocks = static_cast<unsigned>(std::min<int64_t>((a.outputs + 255) / 256, 1024));
  combine_strided_kernel<T><<<blocks, 256, 0, s>>>(a);
  return launch_succeeded();
}

template <class T>
RowReduceLauncher pick(const RowGeometry& g) {
  constexpr int kVec = 16 / sizeof(T);
  if (g.vec == kVec) return &launch_rows<T, kVec>;
  if (g.vec == 1) return &launch_rows<T, 1>;
  return nullptr;
}

}  // namespace

RowReduceLauncher row_reduce_launcher(DType dtype, const RowGeometry& g) {
  switch (dtype) {
    case DType::f32:
      return pick<float>(g);
    case DType::f16:
      return pick<__half>(g);
    case DType::bf16:
      return pick<__nv_bfloat16>(g);
    default:
      return nullptr;
  }
}

StridedReduceLauncher strided_reduce_launcher(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return &launch_strided<float>;
    case DType::f16:
      return &launch_strided<__half>;
    case DType::bf16:
      return &launch_strided<__nv_bfloat16>;
    default:
      return nullptr;
  }
}

}  // namespace eagle::native
