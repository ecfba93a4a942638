#include <algorithm>

#include "engines/native/launch_status.hpp"
#include "engines/native/norm_bwd_kernels.hpp"
#include "engines/native/rows.cuh"

namespace eagle::native {

namespace {

// One pack's g and xhat, and its terms of the row sums.
template <class T, int VEC>
__device__ __forceinline__ void pack_terms(const T* scale, int64_t i, float mu, float inv,
                                           const float (&dy)[VEC], const float (&x)[VEC],
                                           float (&g)[VEC], float (&xhat)[VEC], double& sum_g,
                                           double& sum_gx) {
  float s[VEC], pg = 0.0f, pgx = 0.0f;
  if (scale) rows::load<T, VEC>(scale, i, s);
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    g[j] = scale ? dy[j] * s[j] : dy[j];
    xhat[j] = (x[j] - mu) * inv;
    pg += g[j];
    pgx += g[j] * xhat[j];
  }
  sum_g += pg;
  sum_gx += pgx;
}

template <int VEC>
__device__ __forceinline__ void pack_dx(const float (&g)[VEC], const float (&xhat)[VEC], float inv,
                                        float mean_g, float mean_gx, float (&dx)[VEC]) {
#pragma unroll
  for (int j = 0; j < VEC; ++j) dx[j] = inv * (g[j] - mean_g - xhat[j] * mean_gx);
}

// PARAMS (with CACHED): this group also sums dscale and dbias over its rows, in registers.
template <class T, int VEC, bool CACHED, bool PARAMS>
__global__ void norm_bwd_rows_kernel(NormBwdArgs a, int group) {
  __shared__ double sums[32];
  const T* __restrict__ dy = static_cast<const T*>(a.dy);
  const T* __restrict__ x = static_cast<const T*>(a.x);
  const T* scale = static_cast<const T*>(a.scale);
  T* __restrict__ dx = static_cast<T*>(a.dx);
  const rows::Walk w = rows::walk(group);
  const int64_t len = a.len, stride = int64_t{group} * VEC, start = int64_t{w.lane} * VEC;
  const double n = static_cast<double>(len);
  // Cached rows with parameter gradients: this group's column sums over its rows.
  constexpr bool params = CACHED && PARAMS;
  float ps[params ? kCachedPacks : 1][VEC] = {}, pb[params ? kCachedPacks : 1][VEC] = {};
  for (int64_t r = w.first; r < a.rows; r += w.step) {
    const float mu = a.mean ? a.mean[r] : 0.0f, inv = a.inv_std[r];
    const T* dyr = dy + r * len;
    const T* xr = x + r * len;
    T* dxr = dx + r * len;
    double sum_g = 0.0, sum_gx = 0.0;
    if constexpr (CACHED) {
      float g[kCachedPacks][VEC], xh[kCachedPacks][VEC];
#pragma unroll
      for (int k = 0; k < kCachedPacks; ++k) {
        const int64_t i = start + k * stride;
        if (i < len) {
          float vd[VEC], vx[VEC];
          rows::load<T, VEC>(dyr, i, vd);
          rows::load<T, VEC>(xr, i, vx);
          pack_terms<T, VEC>(scale, i, mu, inv, vd, vx, g[k], xh[k], sum_g, sum_gx);
          if constexpr (params) {
#pragma unroll
            for (int j = 0; j < VEC; ++j) {
              ps[k][j] += vd[j] * xh[k][j];
              pb[k][j] += vd[j];
            }
          }
        }
      }
      const float mean_g =
          a.mean ? static_cast<float>(rows::group_sum(sum_g, sums, group) / n) : 0.0f;
      const auto mean_gx = static_cast<float>(rows::group_sum(sum_gx, sums, group) / n);
#pragma unroll
      for (int k = 0; k < kCachedPacks; ++k) {
        const int64_t i = start + k * stride;
        if (i < len) {
          float out[VEC];
          pack_dx<VEC>(g[k], xh[k], inv, mean_g, mean_gx, out);
          rows::store<T, VEC>(dxr, i, out);
        }
      }
    } else {
      for (int64_t i = start; i < len; i += stride) {
        float vd[VEC], vx[VEC], g[VEC], xh[VEC];
        rows::load<T, VEC>(dyr, i, vd);
        rows::load<T, VEC>(xr, i, vx);
        pack_terms<T, VEC>(scale, i, mu, inv, vd, vx, g, xh, sum_g, sum_gx);
      }
      const float mean_g =
          a.mean ? static_cast<float>(rows::group_sum(sum_g, sums, group) / n) : 0.0f;
      const auto mean_gx = static_cast<float>(rows::group_sum(sum_gx, sums, group) / n);
      for (int64_t i = start; i < len; i += stride) {
        float vd[VEC], vx[VEC], g[VEC], xh[VEC], out[VEC];
        double unused_g = 0.0, unused_gx = 0.0;
        rows::load<T, VEC>(dyr, i, vd);
        rows::load<T, VEC>(xr, i, vx);
        pack_terms<T, VEC>(scale, i, mu, inv, vd, vx, g, xh, unused_g, unused_gx);
        pack_dx<VEC>(g, xh, inv, mean_g, mean_gx, out);
        rows::store<T, VEC>(dxr, i, out);
      }
    }
  }
  if constexpr (params) {
    // Slot w.first (one per group of the grid, w.step of them); a group that ran no row writes
    // its zeros too, so the finish adds every slot.
    float* slots = static_cast<float*>(a.workspace);
#pragma unroll
    for (int k = 0; k < kCachedPacks; ++k) {
      const int64_t i = start + k * stride;
      if (i < len)
#pragma unroll
        for (int j = 0; j < VEC; ++j) {
          slots[w.first * len + i + j] = ps[k][j];
          slots[(w.step + w.first) * len + i + j] = pb[k][j];
        }
    }
  }
}

// Adds the slots' float partials per column in slot order, in double.
template <class T>
__global__ void norm_bwd_finish_slots_kernel(NormBwdArgs a, int64_t count) {
  const float* slots = static_cast<const float*>(a.workspace);
  for (int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; col < a.len;
       col += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    double s = 0.0, b = 0.0;
    for (int64_t k = 0; k < count; ++k) {
      s += slots[k * a.len + col];
      b += slots[(count + k) * a.len + col];
    }
    if (a.dscale) static_cast<T*>(a.dscale)[col] = detail::from_acc<T>(static_cast<float>(s));
    if (a.dbias) static_cast<T*>(a.dbias)[col] = detail::from_acc<T>(static_cast<float>(b));
  }
}

// Block (column tile, chunk of rows): double partial sums of dy * xhat and dy per column.
template <class T>
__global__ void norm_bwd_columns_kernel(NormBwdArgs a) {
  const int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (col >= a.len) return;
  const T* dy = static_cast<const T*>(a.dy);
  const T* x = static_cast<const T*>(a.x);
  const int64_t chunk = blockIdx.y;
  const int64_t begin = chunk * a.chunk_rows, end = min(a.rows, begin + a.chunk_rows);
  double s = 0.0, b = 0.0;
  for (int64_t r = begin; r < end; ++r) {
    const float d = detail::to_acc(dy[r * a.len + col]);
    if (a.dscale) {
      const float mu = a.mean ? a.mean[r] : 0.0f;
      s += static_cast<double>(d) * ((detail::to_acc(x[r * a.len + col]) - mu) * a.inv_std[r]);
    }
    b += d;
  }
  double* partials = static_cast<double*>(a.workspace);
  partials[chunk * a.len + col] = s;
  partials[(a.chunks + chunk) * a.len + col] = b;
}

template <class T>
__global__ void norm_bwd_finish_kernel(NormBwdArgs a) {
  const double* partials = static_cast<const double*>(a.workspace);
  for (int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; col < a.len;
       col += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    double s = 0.0, b = 0.0;
    for (int64_t c = 0; c < a.chunks; ++c) {
      s += partials[c * a.len + col];
      b += partials[(a.chunks + c) * a.len + col];
    }
    if (a.dscale) static_cast<T*>(a.dscale)[col] = detail::from_acc<T>(static_cast<float>(s));
    if (a.dbias) static_cast<T*>(a.dbias)[col] = detail::from_acc<T>(static_cast<float>(b));
  }
}

template <class T, int VEC, bool CACHED, bool PARAMS>
bool launch(const NormBwdArgs& a, const RowGeometry& g, void* stream) noexcept {
  const auto s = static_cast<cudaStream_t>(stream);
  if (a.rows > 0 && a.len > 0) {
    norm_bwd_rows_kernel<T, VEC, CACHED, PARAMS><<<g.grid, g.threads, 0, s>>>(a, g.group);
    if (!launch_succeeded()) return false;
  }
  if ((!a.dscale && !a.dbias) || a.len == 0) return true;
  const auto tiles = static_cast<unsigned>((a.len + kColumnThreads - 1) / kColumnThreads);
  if constexpr (CACHED && PARAMS) {
    if (a.rows == 0) {  // the rows kernel did not run: no slot was written
      norm_bwd_finish_kernel<T><<<std::min(tiles, 1024u), kColumnThreads, 0, s>>>(a);
      return launch_succeeded();
    }
    norm_bwd_finish_slots_kernel<T>
        <<<std::min(tiles, 1024u), kColumnThreads, 0, s>>>(a, norm_bwd_slots(g));
    return launch_succeeded();
  }
  if (a.chunks > 0) {
    norm_bwd_columns_kernel<T>
        <<<dim3(tiles, static_cast<unsigned>(a.chunks)), kColumnThreads, 0, s>>>(a);
    if (!launch_succeeded()) return false;
  }
  norm_bwd_finish_kernel<T><<<std::min(tiles, 1024u), kColumnThreads, 0, s>>>(a);
  return launch_succeeded();
}

template <class T, int VEC>
NormBwdLauncher pick_vec(const RowGeometry& g, bool params) {
  if (!g.cached) return &launch<T, VEC, false, false>;
  return params ? &launch<T, VEC, true, true> : &launch<T, VEC, true, false>;
}

template <class T>
NormBwdLauncher pick(const RowGeometry& g, bool params) {
  constexpr int kVec = 16 / sizeof(T);
  if (g.vec == kVec) return pick_vec<T, kVec>(g, params);
  if (g.vec == 1) return pick_vec<T, 1>(g, params);
  return nullptr;
}

}  // namespace

NormBwdLauncher norm_bwd_launcher(DType dtype, const RowGeometry& g, bool params) {
  switch (dtype) {
    case DType::f32:
      return pick<float>(g, params);
    case DType::f16:
      return pick<__half>(g, params);
    case DType::bf16:
      return pick<__nv_bfloat16>(g, params);
    default:
      return nullptr;
  }
}

}  // namespace eagle::native
