#include <algorithm>
#include <cmath>

#include "engines/native/dtype_dispatch.cuh"
#include "engines/native/launch_status.hpp"
#include "engines/native/loss_kernels.hpp"
#include "engines/native/row_stats.cuh"
#include "engines/native/rows.cuh"

namespace eagle::native {

namespace {

using rows::group_reduce;

constexpr int kTotalThreads = 1024;

using rows::finish_lse;
using rows::rescaled;

// A zero weight drops its term, so an infinite logit it would multiply gives no NaN.
__device__ __forceinline__ float weighted(float w, float v) {
  return w == 0.0f ? 0.0f : w * v;
}

// The loss of one row from its logsumexp, its sum of logits, its target and the target's logit
// (read by the caller only when the target is a class).
__device__ __forceinline__ float row_loss(const CrossEntropyArgs& a, int64_t t, float target_logit,
                                          float lse, float row_sum) {
  if (t == a.ignore_index) return 0.0f;
  if (t < 0 || t >= a.classes) return NAN;  // the reference refuses this call; no read outside
  const float ls = a.label_smoothing;
  return weighted(1.0f - ls, lse - target_logit) +
         weighted(ls, lse - row_sum / static_cast<float>(a.classes));
}

// 2^x by the SFU alone (ex2.approx.ftz: about 2 ulp; -inf -> 0, NaN -> NaN).
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// row_stats::lse_fold with the step's exps as exp2((x - shift) * log2(e)) on the SFU: a
// subtract, a multiply and one MUFU op an element instead of expf's eight instructions (the
// forward was issue-bound at ~11 instructions an element). x - shift is exact near the max
// (Sterbenz), where the terms that matter are; the rescale of the running sum stays expf.
template <int N>
__device__ __forceinline__ void lse_fold_fast(const float (&v)[N], row_stats::Lse& acc) {
  constexpr float kLog2e = 1.4426950408889634f;
  float bm = v[0];
#pragma unroll
  for (int j = 1; j < N; ++j) bm = fmaxf(bm, v[j]);
  const float m = fmaxf(acc.m, bm), shift = row_stats::lse_shift(m);
  float bs = 0.0f;
#pragma unroll
  for (int j = 0; j < N; ++j) bs += fast_exp2((v[j] - shift) * kLog2e);
  acc.s = acc.s * static_cast<double>(expf(acc.m - shift)) + static_cast<double>(bs);
  acc.m = m;
}

// Packs a lane loads per step of the forward: 4 x 16 bytes in flight per lane.
constexpr int kCePacks = 4;

// One step's kCePacks packs of a row from `base` (packs `stride` elements apart), -inf past
// `end` (nothing to the exps): what the forward and the backward's lse fold per step.
template <class T, int VEC>
__device__ __forceinline__ void load_step(const T* xr, int64_t base, int64_t stride, int64_t end,
                                          float (&v)[kCePacks * VEC]) {
#pragma unroll
  for (int u = 0; u < kCePacks; ++u) {
    const int64_t i = base + u * stride;
    float pk[VEC];
    if (i < end) {
      rows::load<T, VEC>(xr, i, pk);
    } else {
#pragma unroll
      for (int j = 0; j < VEC; ++j) pk[j] = -INFINITY;
    }
#pragma unroll
    for (int j = 0; j < VEC; ++j) v[u * VEC + j] = pk[j];
  }
}

// A warp per piece of a row (the whole row, or one chunk of a split row): each lane folds
// kCePacks packs at a time into a running (max, sum of exp) with one rescale per step and a
// float sum of the logits, then the warp combines its lanes by shuffles (no barrier, no shared
// memory). SPLIT: lane 0 writes the chunk's (max, sum of exp, sum) to the partials; else the
// row's lse and loss (its target logit loaded when the row starts, so its latency hides).
template <class T, class Id, int VEC, bool SPLIT, bool SMOOTH>
__global__ void __launch_bounds__(kCeThreads, kCeBlocksPerSm)
    cross_entropy_kernel(CrossEntropyArgs a) {
  const T* __restrict__ logits = static_cast<const T*>(a.logits);
  const Id* __restrict__ targets = static_cast<const Id*>(a.targets);
  const int lane = static_cast<int>(threadIdx.x & 31);
  const int64_t warps = static_cast<int64_t>(gridDim.x) * (kCeThreads / 32);
  const int64_t pieces = a.rows * a.splits, stride = int64_t{32} * VEC;
  for (int64_t p = static_cast<int64_t>(blockIdx.x) * (kCeThreads / 32) + (threadIdx.x >> 5);
       p < pieces; p += warps) {
    const int64_t r = SPLIT ? p / a.splits : p;
    const int64_t begin = SPLIT ? (p % a.splits) * a.chunk : 0;
    const int64_t end = SPLIT ? min(a.classes, begin + a.chunk) : a.classes;
    const T* xr = logits + r * a.classes;
    int64_t t = 0;
    float target_logit = 0.0f;
    if (!SPLIT && lane == 0) {
      t = static_cast<int64_t>(targets[r]);
      if (t >= 0 && t < a.classes) target_logit = detail::to_acc(xr[t]);
    }
    row_stats::Lse acc;
    double sum = 0.0;
    for (int64_t base = begin + int64_t{lane} * VEC; base < end; base += kCePacks * stride) {
      float v[kCePacks * VEC];
      load_step<T, VEC>(xr, base, stride, end, v);
      lse_fold_fast(v, acc);
      if constexpr (SMOOTH) {   // the plain sum only label smoothing reads
        float step_sum = 0.0f;  // the logits of this step, in float; -inf padding left out
#pragma unroll
        for (int u = 0; u < kCePacks; ++u)
          if (base + u * stride < end)
#pragma unroll
            for (int j = 0; j < VEC; ++j) step_sum += v[u * VEC + j];
        sum += step_sum;
      }
    }
    row_stats::warp_lse(acc, sum);
    if (lane != 0) continue;
    if constexpr (SPLIT) {
      a.partials[3 * p] = acc.m;
      a.partials[3 * p + 1] = acc.s;
      a.partials[3 * p + 2] = sum;
    } else {
      const float lse = finish_lse(acc.m, acc.s);
      if (a.lse) a.lse[r] = lse;
      a.row_loss[r] = row_loss(a, t, target_logit, lse, static_cast<float>(sum));
    }
  }
}

// One block's sum of v, valid in thread 0: each warp's by shuffles, then warp 0 sums the warps'
// (a fixed order, so the same bits every run; one barrier, and one after so the scratch is free
// for the next call).
template <class V>
__device__ __forceinline__ V block_sum(V v) {
  __shared__ V scratch[32];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  V r = V(0);
  if (warp == 0) {
    r = lane < static_cast<int>(blockDim.x >> 5) ? scratch[lane] : V(0);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) r += __shfl_down_sync(0xffffffffu, r, o);
  }
  __syncthreads();
  return r;
}

template <class Id>
__global__ void __launch_bounds__(kTotalThreads)
    loss_total_kernel(const float* row_loss, const Id* targets, int64_t rows, int64_t ignore_index,
                      bool mean, float* loss) {
  double sum = 0.0;
  int64_t count = 0;
#pragma unroll 4  // a few rows' loads in flight per thread: one block does all the rows
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    sum += row_loss[r];
    count += static_cast<int64_t>(targets[r]) != ignore_index;
  }
  const double total = block_sum(sum);
  const int64_t counted = block_sum(count);
  if (threadIdx.x == 0)
    *loss = static_cast<float>(!mean          ? total
                               : counted == 0 ? NAN
                                              : total / static_cast<double>(counted));
}

// Split rows, second pass: a thread per row combines its chunks in chunk order.
template <class T, class Id>
__global__ void split_finish_kernel(CrossEntropyArgs a) {
  const T* __restrict__ logits = static_cast<const T*>(a.logits);
  const Id* __restrict__ targets = static_cast<const Id*>(a.targets);
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; r < a.rows;
       r += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double* part = a.partials + 3 * r * a.splits;
    float m = -INFINITY;
    for (int64_t k = 0; k < a.splits; ++k) m = fmaxf(m, static_cast<float>(part[3 * k]));
    double s = 0.0, sum = 0.0;
    for (int64_t k = 0; k < a.splits; ++k) {
      s += rescaled(static_cast<float>(part[3 * k]), part[3 * k + 1], m);
      sum += part[3 * k + 2];
    }
    const float lse = finish_lse(m, s);
    if (a.lse) a.lse[r] = lse;
    const auto t = static_cast<int64_t>(targets[r]);
    const float target_logit =
        t >= 0 && t < a.classes ? detail::to_acc(logits[r * a.classes + t]) : 0.0f;
    a.row_loss[r] = row_loss(a, t, target_logit, lse, static_cast<float>(sum));
  }
}

template <class T, class Id, int VEC, bool SPLIT>
bool launch(const CrossEntropyArgs& a, const RowGeometry& g, void* stream) noexcept {
  const auto s = static_cast<cudaStream_t>(stream);
  // Without label smoothing the row's plain sum is not read (row_loss weighs it by 0): not
  // summed, one add an element fewer.
  if (a.label_smoothing != 0.0f)
    cross_entropy_kernel<T, Id, VEC, SPLIT, true><<<g.grid, kCeThreads, 0, s>>>(a);
  else
    cross_entropy_kernel<T, Id, VEC, SPLIT, false><<<g.grid, kCeThreads, 0, s>>>(a);
  if (!launch_succeeded()) return false;
  if constexpr (SPLIT) {
    const auto blocks = static_cast<unsigned>(std::min<int64_t>((a.rows + 255) / 256, 1024));
    split_finish_kernel<T, Id><<<blocks, 256, 0, s>>>(a);
    return launch_succeeded();
  }
  return true;
}

template <class T, class Id, bool SPLIT>
CrossEntropyLauncher pick(const RowGeometry& g) {
  constexpr int kVec = 16 / sizeof(T);
  if (g.vec == kVec) return &launch<T, Id, kVec, SPLIT>;
  if (g.vec == 1) return &launch<T, Id, 1, SPLIT>;
  return nullptr;
}

template <class T, bool SPLIT = false>
CrossEntropyLauncher pick_id(DType targets, const RowGeometry& g) {
  if (targets == DType::i32) return pick<T, int32_t, SPLIT>(g);
  if (targets == DType::i64) return pick<T, int64_t, SPLIT>(g);
  return nullptr;
}

// The elements of x[0..n) unequal to `value`, counted by one block into *y (an int64_t for the
// backward's mean, a float or double for count_not_equal).
template <class Id, class Out>
__global__ void __launch_bounds__(kTotalThreads)
    count_not_equal_kernel(const Id* x, int64_t n, int64_t value, Out* y) {
  int64_t count = 0;
#pragma unroll 4
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
    count += static_cast<int64_t>(x[i]) != value;
  const int64_t counted = block_sum(count);
  if (threadIdx.x == 0) *y = static_cast<Out>(counted);
}

template <class T, class Id, int VEC>
__global__ void cross_entropy_bwd_kernel(CrossEntropyBwdArgs a, int group) {
  __shared__ float scratch[32];
  __shared__ double sums[32];
  const T* __restrict__ logits = static_cast<const T*>(a.logits);
  const Id* __restrict__ targets = static_cast<const Id*>(a.targets);
  T* __restrict__ dlogits = static_cast<T*>(a.dlogits);
  const rows::Walk w = rows::walk(group);
  const int64_t len = a.classes, stride = int64_t{group} * VEC, start = int64_t{w.lane} * VEC;
  const float ls = a.label_smoothing, spread = ls / static_cast<float>(len);
  const int64_t pieces = a.rows * a.splits;
  for (int64_t p = w.first; p < pieces; p += w.step) {
    const int64_t r = p / a.splits;
    const int64_t begin = (p % a.splits) * a.chunk;
    const int64_t end = a.splits == 1 ? len : min(len, begin + a.chunk);
    const T* xr = logits + r * len;
    T* dr = dlogits + r * len;
    const int64_t t = static_cast<int64_t>(targets[r]);
    float lse;
    if (a.lse) {  // always so when split
      lse = a.lse[r];
    } else {  // as the forward folds it: kCePacks packs a step, one rescale a step
      row_stats::Lse acc;
      for (int64_t base = start; base < len; base += kCePacks * stride) {
        float v[kCePacks * VEC];
        load_step<T, VEC>(xr, base, stride, len, v);
        lse_fold_fast(v, acc);
      }
      const float row_max = group_reduce(acc.m, rows::Max{}, scratch, group);
      lse = finish_lse(row_max, rows::group_sum(rescaled(acc.m, acc.s, row_max), sums, group));
    }
    float weight = a.reduction == 0 ? a.dloss[r] : a.dloss[0];
    if (a.reduction == 2) weight /= static_cast<float>(*a.counted);
    const bool ignored = t == a.ignore_index, bad = !ignored && (t < 0 || t >= len);
    for (int64_t i = begin + start; i < end; i += stride) {
      float v[VEC], out[VEC];
      rows::load<T, VEC>(xr, i, v);
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        float g = expf(v[j] - lse) - spread;
        if (i + j == t) g -= 1.0f - ls;
        out[j] = ignored ? 0.0f : bad ? NAN : weight * g;
      }
      rows::store<T, VEC>(dr, i, out);
    }
  }
}

template <class T, class Id, int VEC>
bool launch_bwd(const CrossEntropyBwdArgs& a, const RowGeometry& g, void* stream) noexcept {
  const auto s = static_cast<cudaStream_t>(stream);
  if (a.reduction == 2) {
    count_not_equal_kernel<<<1, kTotalThreads, 0, s>>>(static_cast<const Id*>(a.targets), a.rows,
                                                       a.ignore_index, a.counted);
    if (!launch_succeeded()) return false;
  }
  cross_entropy_bwd_kernel<T, Id, VEC><<<g.grid, g.threads, 0, s>>>(a, g.group);
  return launch_succeeded();
}

template <class T, class Id>
CrossEntropyBwdLauncher pick_bwd(const RowGeometry& g) {
  constexpr int kVec = 16 / sizeof(T);
  if (g.vec == kVec) return &launch_bwd<T, Id, kVec>;
  if (g.vec == 1) return &launch_bwd<T, Id, 1>;
  return nullptr;
}

template <class T>
CrossEntropyBwdLauncher pick_bwd_id(DType targets, const RowGeometry& g) {
  if (targets == DType::i32) return pick_bwd<T, int32_t>(g);
  if (targets == DType::i64) return pick_bwd<T, int64_t>(g);
  return nullptr;
}

}  // namespace

CrossEntropyBwdLauncher cross_entropy_bwd_launcher(DType logits, DType targets,
                                                   const RowGeometry& g) {
  return by_float_dtype(logits, [&]<class T>() { return pick_bwd_id<T>(targets, g); });
}

CrossEntropyLauncher split_cross_entropy_launcher(DType logits, DType targets,
                                                  const RowGeometry& g) {
  return by_float_dtype(logits, [&]<class T>() { return pick_id<T, true>(targets, g); });
}

CrossEntropyLauncher cross_entropy_launcher(DType logits, DType targets, const RowGeometry& g) {
  return by_float_dtype(logits, [&]<class T>() { return pick_id<T>(targets, g); });
}

bool launch_loss_total(const float* row_loss, const void* targets, DType targets_dtype,
                       int64_t rows, int64_t ignore_index, bool mean, float* loss,
                       void* stream) noexcept {
  const auto s = static_cast<cudaStream_t>(stream);
  if (targets_dtype == DType::i32)
    loss_total_kernel<<<1, kTotalThreads, 0, s>>>(row_loss, static_cast<const int32_t*>(targets),
                                                  rows, ignore_index, mean, loss);
  else
    loss_total_kernel<<<1, kTotalThreads, 0, s>>>(row_loss, static_cast<const int64_t*>(targets),
                                                  rows, ignore_index, mean, loss);
  return launch_succeeded();
}

bool launch_count_not_equal(const void* x, DType x_dtype, int64_t n, int64_t value, void* y,
                            DType y_dtype, void* stream) noexcept {
  const auto s = static_cast<cudaStream_t>(stream);
  auto go = [&]<class Id>(const Id* ids) {
    if (y_dtype == DType::f64)
      count_not_equal_kernel<<<1, kTotalThreads, 0, s>>>(ids, n, value, static_cast<double*>(y));
    else
      count_not_equal_kernel<<<1, kTotalThreads, 0, s>>>(ids, n, value, static_cast<float*>(y));
  };
  if (x_dtype == DType::i32)
    go(static_cast<const int32_t*>(x));
  else
    go(static_cast<const int64_t*>(x));
  return launch_succeeded();
}

}  // namespace eagle::native
