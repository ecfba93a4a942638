#include <cmath>

#include "engines/native/dtype_dispatch.cuh"
#include "engines/native/launch_status.hpp"
#include "engines/native/pack_io.cuh"
#include "engines/native/row_stats.cuh"
#include "engines/native/rows.cuh"
#include "engines/native/softmax_kernels.hpp"

namespace eagle::native {

namespace {

using rows::group_reduce;

using rows::finish_lse;

// y = exp(x - lse), or x - lse for log softmax.
template <bool LOG, int VEC>
__device__ __forceinline__ void write_out(const float (&v)[VEC], float lse, float (&out)[VEC]) {
#pragma unroll
  for (int j = 0; j < VEC; ++j) out[j] = LOG ? v[j] - lse : expf(v[j] - lse);
}

// The row in registers (kCachedPacks packs a thread): one read of x. Launch-bounded at 1024
// threads (at most 64 registers): a cached row of 4096 packs takes a block that large.
template <class T, int VEC, bool LOG>
__global__ void __launch_bounds__(1024)
    softmax_cached_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n_rows, int64_t len,
                          int group) {
  __shared__ float scratch[32];
  __shared__ double sums[32];
  const rows::Walk w = rows::walk(group);
  const int64_t stride = int64_t{group} * VEC;
  const int64_t start = int64_t{w.lane} * VEC;
  for (int64_t r = w.first; r < n_rows; r += w.step) {
    const T* xr = x + r * len;
    T* yr = y + r * len;
    float v[kCachedPacks][VEC];
    float m = -INFINITY;
#pragma unroll
    for (int k = 0; k < kCachedPacks; ++k) {
      const int64_t i = start + k * stride;
      if (i < len) {
        rows::load<T, VEC>(xr, i, v[k]);
      } else {
#pragma unroll
        for (int j = 0; j < VEC; ++j) v[k][j] = -INFINITY;
      }
#pragma unroll
      for (int j = 0; j < VEC; ++j) m = fmaxf(m, v[k][j]);
    }
    m = group_reduce(m, rows::Max{}, scratch, group);
    // Softmax keeps exp(x - m) in place of x and scales it by 1 / sum: one exponential per
    // element, not two (the special-function unit, not memory, would bound a second one).
    // Log softmax keeps x. At most kCachedPacks * VEC terms a thread; the group adds in double.
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < kCachedPacks; ++k)
#pragma unroll
      for (int j = 0; j < VEC; ++j) {
        const float e = expf(v[k][j] - m);
        s += e;
        if constexpr (!LOG) v[k][j] = e;
      }
    const double total = rows::group_sum(s, sums, group);
    const float lse = finish_lse(m, total);
    // An infinite max: exp(x - m) is already the reference's exp(x - lse) (0, or NaN).
    const float scale = isinf(m) ? 1.0f : static_cast<float>(1.0 / total);
#pragma unroll
    for (int k = 0; k < kCachedPacks; ++k) {
      const int64_t i = start + k * stride;
      if (i < len) {
        float out[VEC];
#pragma unroll
        for (int j = 0; j < VEC; ++j) out[j] = LOG ? v[k][j] - lse : v[k][j] * scale;
        rows::store<T, VEC>(yr, i, out);
      }
    }
  }
}

// A row longer than the registers: one online read for the max and the rescaled sum (a rescale
// per pack, not per element), four packs in flight per thread; a second read writes y.
template <class T, int VEC, bool LOG>
__global__ void softmax_online_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t n_rows,
                                      int64_t len, int group) {
  __shared__ float scratch[32];
  __shared__ double sums[32];
  const rows::Walk w = rows::walk(group);
  const int64_t stride = int64_t{group} * VEC;
  const int64_t start = int64_t{w.lane} * VEC;
  for (int64_t r = w.first; r < n_rows; r += w.step) {
    const T* xr = x + r * len;
    T* yr = y + r * len;
    float m = -INFINITY;
    double s = 0.0;
    int64_t i = start;
    for (; i + 3 * stride < len; i += 4 * stride) {
      float v[4][VEC];
#pragma unroll
      for (int u = 0; u < 4; ++u) rows::load<T, VEC>(xr, i + u * stride, v[u]);
#pragma unroll
      for (int u = 0; u < 4; ++u) rows::online_pack<VEC>(v[u], m, s);
    }
    for (; i < len; i += stride) {
      float v[VEC];
      rows::load<T, VEC>(xr, i, v);
      rows::online_pack<VEC>(v, m, s);
    }
    const float row_max = group_reduce(m, rows::Max{}, scratch, group);
    const float lse =
        finish_lse(row_max, rows::group_sum(rows::shifted_sum(m, s, row_max), sums, group));
#pragma unroll 4
    for (int64_t k = start; k < len; k += stride) {
      float v[VEC], out[VEC];
      rows::load<T, VEC>(xr, k, v);
      write_out<LOG, VEC>(v, lse, out);
      rows::store<T, VEC>(yr, k, out);
    }
  }
}

// One row per group: the loops in the kernels only guard a capped grid.
template <class T, int VEC, bool CACHED, bool LOG>
void launch_rows(const SoftmaxArgs& a, const RowGeometry& g, cudaStream_t s) {
  const unsigned grid = rows::one_row_per_group_grid(a.rows, g.threads, g.group);
  const auto* x = static_cast<const T*>(a.x);
  auto* y = static_cast<T*>(a.y);
  if constexpr (CACHED)
    softmax_cached_kernel<T, VEC, LOG><<<grid, g.threads, 0, s>>>(x, y, a.rows, a.len, g.group);
  else
    softmax_online_kernel<T, VEC, LOG><<<grid, g.threads, 0, s>>>(x, y, a.rows, a.len, g.group);
}

template <class T, int VEC, bool CACHED>
bool launch(const SoftmaxArgs& a, const RowGeometry& g, void* stream) noexcept {
  const auto s = static_cast<cudaStream_t>(stream);
  if (a.log)
    launch_rows<T, VEC, CACHED, true>(a, g, s);
  else
    launch_rows<T, VEC, CACHED, false>(a, g, s);
  return launch_succeeded();
}

// Split rows, first pass: each chunk's max and sum of exp(x - max), online a pack at a time.
template <class T, int VEC>
__global__ void __launch_bounds__(1024) split_stats_kernel(SoftmaxArgs a, int group) {
  __shared__ float scratch[32];
  __shared__ double sums[32];
  const T* __restrict__ x = static_cast<const T*>(a.x);
  const rows::Walk w = rows::walk(group);
  const int64_t pieces = a.rows * a.splits, stride = int64_t{group} * VEC;
  for (int64_t p = w.first; p < pieces; p += w.step) {
    const int64_t row = p / a.splits, begin = (p % a.splits) * a.chunk;
    const int64_t end = min(a.len, begin + a.chunk);
    const T* xr = x + row * a.len;
    float m = -INFINITY;
    double s = 0.0;
    int64_t i = begin + int64_t{w.lane} * VEC;
    for (; i + 3 * stride < end; i += 4 * stride) {
      float v[4][VEC];
#pragma unroll
      for (int u = 0; u < 4; ++u) rows::load<T, VEC>(xr, i + u * stride, v[u]);
#pragma unroll
      for (int u = 0; u < 4; ++u) rows::online_pack<VEC>(v[u], m, s);
    }
    for (; i < end; i += stride) {
      float v[VEC];
      rows::load<T, VEC>(xr, i, v);
      rows::online_pack<VEC>(v, m, s);
    }
    const float chunk_max = group_reduce(m, rows::Max{}, scratch, group);
    const double total = rows::group_sum(rows::shifted_sum(m, s, chunk_max), sums, group);
    if (w.lane == 0) {
      a.partials[2 * p] = chunk_max;
      a.partials[2 * p + 1] = total;
    }
  }
}

// Split rows, second pass: the row's chunks combined by the group (a fixed order: the same
// bits every run), then this chunk written.
template <class T, int VEC, bool LOG>
__global__ void __launch_bounds__(1024) split_write_kernel(SoftmaxArgs a, int group) {
  __shared__ float scratch[32];
  __shared__ double sums[32];
  const T* __restrict__ x = static_cast<const T*>(a.x);
  T* __restrict__ y = static_cast<T*>(a.y);
  const rows::Walk w = rows::walk(group);
  const int64_t pieces = a.rows * a.splits, stride = int64_t{group} * VEC;
  for (int64_t p = w.first; p < pieces; p += w.step) {
    const int64_t row = p / a.splits, begin = (p % a.splits) * a.chunk;
    const int64_t end = min(a.len, begin + a.chunk);
    const double* part = a.partials + 2 * row * a.splits;
    float m = -INFINITY;
    for (int64_t k = w.lane; k < a.splits; k += group)
      m = fmaxf(m, static_cast<float>(part[2 * k]));
    m = group_reduce(m, rows::Max{}, scratch, group);
    double s = 0.0;
    for (int64_t k = w.lane; k < a.splits; k += group)
      s += rows::shifted_sum(static_cast<float>(part[2 * k]), part[2 * k + 1], m);
    const float lse = finish_lse(m, rows::group_sum(s, sums, group));
#pragma unroll 4
    for (int64_t i = begin + int64_t{w.lane} * VEC; i < end; i += stride) {
      float v[VEC], out[VEC];
      rows::load<T, VEC>(x + row * a.len, i, v);
      write_out<LOG, VEC>(v, lse, out);
      rows::store<T, VEC>(y + row * a.len, i, out);
    }
  }
}

template <class T, int VEC>
bool launch_split(const SoftmaxArgs& a, const RowGeometry& g, void* stream) noexcept {
  const auto s = static_cast<cudaStream_t>(stream);
  const unsigned grid = rows::one_row_per_group_grid(a.rows * a.splits, g.threads, g.group);
  split_stats_kernel<T, VEC><<<grid, g.threads, 0, s>>>(a, g.group);
  if (!launch_succeeded()) return false;
  if (a.log)
    split_write_kernel<T, VEC, true><<<grid, g.threads, 0, s>>>(a, g.group);
  else
    split_write_kernel<T, VEC, false><<<grid, g.threads, 0, s>>>(a, g.group);
  return launch_succeeded();
}

template <class T>
SoftmaxLauncher pick_split(const RowGeometry& g) {
  constexpr int kVec = 16 / sizeof(T);
  if (g.vec == kVec) return &launch_split<T, kVec>;
  if (g.vec == 1) return &launch_split<T, 1>;
  return nullptr;
}

template <class T>
SoftmaxLauncher pick(const RowGeometry& g) {
  constexpr int kVec = 16 / sizeof(T);
  if (g.vec == kVec) return g.cached ? &launch<T, kVec, true> : &launch<T, kVec, false>;
  if (g.vec == 1) return g.cached ? &launch<T, 1, true> : &launch<T, 1, false>;
  return nullptr;
}

// dx for one pack from y, dy and the row's sum.
template <int VEC>
__device__ __forceinline__ void grad_pack(const float (&y)[VEC], const float (&dy)[VEC], float s,
                                          bool log, float (&dx)[VEC]) {
#pragma unroll
  for (int j = 0; j < VEC; ++j) dx[j] = log ? dy[j] - expf(y[j]) * s : y[j] * (dy[j] - s);
}

template <int VEC>
__device__ __forceinline__ float grad_term(const float (&y)[VEC], const float (&dy)[VEC],
                                           bool log) {
  float s = 0.0f;
#pragma unroll
  for (int j = 0; j < VEC; ++j) s += log ? dy[j] : dy[j] * y[j];
  return s;
}

// One row per group. Cached: the row's packs of y and dy kept as loaded (16-bit packs stay
// packed), launch-bounded at 1024 threads (at most 64 registers, so 8 blocks of 128 an SM and a
// cached block of 1024 can launch); one barrier a row (double-buffered scratch); log a
// template parameter. dx leaves as one 16-byte store a pack (pack_io).
template <class T, int VEC, bool CACHED, bool LOG>
__global__ void __maxnreg__(64) softmax_bwd_kernel(SoftmaxBwdArgs a, int group) {
  __shared__ double sums[2][32];
  const T* __restrict__ y = static_cast<const T*>(a.y);
  const T* __restrict__ dy = static_cast<const T*>(a.dy);
  T* __restrict__ dx = static_cast<T*>(a.dx);
  const rows::Walk w = rows::walk(group);
  const int64_t len = a.len, stride = int64_t{group} * VEC, start = int64_t{w.lane} * VEC;
  int parity = 0;
  for (int64_t r = w.first; r < a.rows; r += w.step) {
    const T* yr = y + r * len;
    const T* dyr = dy + r * len;
    T* dxr = dx + r * len;
    if constexpr (CACHED) {
      // A cached row has at most 1024 x kCachedPacks packs: 32-bit offsets (fewer registers).
      const int n = static_cast<int>(len), lane0 = static_cast<int>(start);
      const int step = static_cast<int>(stride);
      pack_io::Raw<T, VEC> ry[kCachedPacks], rd[kCachedPacks];
#pragma unroll
      for (int k = 0; k < kCachedPacks; ++k) {
        const int i = lane0 + k * step;
        if (i < n) {
          ry[k] = pack_io::load_raw<T, VEC>(yr, i);
          rd[k] = pack_io::load_raw<T, VEC>(dyr, i);
        }
      }
      double s = 0.0;
#pragma unroll
      for (int k = 0; k < kCachedPacks; ++k) {
        if (lane0 + k * step < n) {
          float vy[VEC], vd[VEC];
          pack_io::unpack_raw<T, VEC>(ry[k], vy);
          pack_io::unpack_raw<T, VEC>(rd[k], vd);
          s += grad_term<VEC>(vy, vd, LOG);
        }
      }
      const auto total = static_cast<float>(row_stats::group_sum1(s, sums[parity], group));
      parity ^= 1;
#pragma unroll
      for (int k = 0; k < kCachedPacks; ++k) {
        const int i = lane0 + k * step;
        if (i < n) {
          float vy[VEC], vd[VEC], out[VEC];
          pack_io::unpack_raw<T, VEC>(ry[k], vy);
          pack_io::unpack_raw<T, VEC>(rd[k], vd);
          grad_pack<VEC>(vy, vd, total, LOG, out);
          pack_io::store<T, VEC>(dxr, i, out);
        }
      }
    } else {
      double s = 0.0;
      for (int64_t i = start; i < len; i += stride) {
        float vy[VEC], vd[VEC];
        rows::load<T, VEC>(yr, i, vy);
        rows::load<T, VEC>(dyr, i, vd);
        s += grad_term<VEC>(vy, vd, LOG);
      }
      const auto total = static_cast<float>(row_stats::group_sum1(s, sums[parity], group));
      parity ^= 1;
      for (int64_t i = start; i < len; i += stride) {
        float vy[VEC], vd[VEC], out[VEC];
        rows::load<T, VEC>(yr, i, vy);
        rows::load<T, VEC>(dyr, i, vd);
        grad_pack<VEC>(vy, vd, total, LOG, out);
        pack_io::store<T, VEC>(dxr, i, out);
      }
    }
  }
}

// Split rows, first pass: each chunk's sum of dy * y (log: of dy).
template <class T, int VEC>
__global__ void split_bwd_stats_kernel(SoftmaxBwdArgs a, int group) {
  __shared__ double sums[32];
  const rows::Walk w = rows::walk(group);
  const int64_t pieces = a.rows * a.splits, stride = int64_t{group} * VEC;
  for (int64_t p = w.first; p < pieces; p += w.step) {
    const int64_t row = p / a.splits, begin = (p % a.splits) * a.chunk;
    const int64_t end = min(a.len, begin + a.chunk);
    const T* yr = static_cast<const T*>(a.y) + row * a.len;
    const T* dyr = static_cast<const T*>(a.dy) + row * a.len;
    double s = 0.0;
    for (int64_t i = begin + int64_t{w.lane} * VEC; i < end; i += stride) {
      float vy[VEC], vd[VEC];
      rows::load<T, VEC>(yr, i, vy);
      rows::load<T, VEC>(dyr, i, vd);
      s += grad_term<VEC>(vy, vd, a.log);
    }
    s = rows::group_sum(s, sums, group);
    if (w.lane == 0) a.partials[p] = s;
  }
}

// Split rows, second pass: the row's chunk sums added by the group (a fixed order), then this
// chunk written.
template <class T, int VEC>
__global__ void split_bwd_write_kernel(SoftmaxBwdArgs a, int group) {
  __shared__ double sums[32];
  const rows::Walk w = rows::walk(group);
  const int64_t pieces = a.rows * a.splits, stride = int64_t{group} * VEC;
  for (int64_t p = w.first; p < pieces; p += w.step) {
    const int64_t row = p / a.splits, begin = (p % a.splits) * a.chunk;
    const int64_t end = min(a.len, begin + a.chunk);
    double s = 0.0;
    for (int64_t k = w.lane; k < a.splits; k += group) s += a.partials[row * a.splits + k];
    const auto total = static_cast<float>(rows::group_sum(s, sums, group));
    const T* yr = static_cast<const T*>(a.y) + row * a.len;
    const T* dyr = static_cast<const T*>(a.dy) + row * a.len;
    T* dxr = static_cast<T*>(a.dx) + row * a.len;
    for (int64_t i = begin + int64_t{w.lane} * VEC; i < end; i += stride) {
      float vy[VEC], vd[VEC], out[VEC];
      rows::load<T, VEC>(yr, i, vy);
      rows::load<T, VEC>(dyr, i, vd);
      grad_pack<VEC>(vy, vd, total, a.log, out);
      pack_io::store<T, VEC>(dxr, i, out);
    }
  }
}

template <class T, int VEC>
bool launch_split_bwd(const SoftmaxBwdArgs& a, const RowGeometry& g, void* stream) noexcept {
  const auto s = static_cast<cudaStream_t>(stream);
  split_bwd_stats_kernel<T, VEC><<<g.grid, g.threads, 0, s>>>(a, g.group);
  if (!launch_succeeded()) return false;
  split_bwd_write_kernel<T, VEC><<<g.grid, g.threads, 0, s>>>(a, g.group);
  return launch_succeeded();
}

template <class T>
SoftmaxBwdLauncher pick_split_bwd(const RowGeometry& g) {
  constexpr int kVec = 16 / sizeof(T);
  if (g.vec == kVec) return &launch_split_bwd<T, kVec>;
  if (g.vec == 1) return &launch_split_bwd<T, 1>;
  return nullptr;
}

// Cached rows: one row per group (blocks start as others finish; the geometry's persistent grid
// left a part-empty last round). Streamed rows keep the geometry's grid.
template <class T, int VEC, bool CACHED>
bool launch_bwd(const SoftmaxBwdArgs& a, const RowGeometry& g, void* stream) noexcept {
  const unsigned grid = CACHED ? rows::one_row_per_group_grid(a.rows, g.threads, g.group) : g.grid;
  const auto s = static_cast<cudaStream_t>(stream);
  if (a.log)
    softmax_bwd_kernel<T, VEC, CACHED, true><<<grid, g.threads, 0, s>>>(a, g.group);
  else
    softmax_bwd_kernel<T, VEC, CACHED, false><<<grid, g.threads, 0, s>>>(a, g.group);
  return launch_succeeded();
}

template <class T>
SoftmaxBwdLauncher pick_bwd(const RowGeometry& g) {
  constexpr int kVec = 16 / sizeof(T);
  if (g.vec == kVec) return g.cached ? &launch_bwd<T, kVec, true> : &launch_bwd<T, kVec, false>;
  if (g.vec == 1) return g.cached ? &launch_bwd<T, 1, true> : &launch_bwd<T, 1, false>;
  return nullptr;
}

}  // namespace

SoftmaxBwdLauncher split_softmax_bwd_launcher(DType dtype, const RowGeometry& g) {
  return by_float_dtype(dtype, [&]<class T>() { return pick_split_bwd<T>(g); });
}

SoftmaxBwdLauncher softmax_bwd_launcher(DType dtype, const RowGeometry& g) {
  return by_float_dtype(dtype, [&]<class T>() { return pick_bwd<T>(g); });
}

SoftmaxLauncher split_softmax_launcher(DType dtype, const RowGeometry& g) {
  return by_float_dtype(dtype, [&]<class T>() { return pick_split<T>(g); });
}

SoftmaxLauncher softmax_launcher(DType dtype, const RowGeometry& g) {
  return by_float_dtype(dtype, [&]<class T>() { return pick<T>(g); });
}

}  // namespace eagle::native
