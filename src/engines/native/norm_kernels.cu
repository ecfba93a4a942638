#include "engines/native/launch_status.hpp"
#include "engines/native/norm_kernels.hpp"
#include "engines/native/rows.cuh"

namespace eagle::native {

namespace {

template <class T, int VEC>
__device__ __forceinline__ void normalize_pack(const T* scale, const T* bias, int64_t i, float mean,
                                               float inv, const float (&v)[VEC],
                                               float (&out)[VEC]) {
  float s[VEC], b[VEC];
  if (scale) rows::load<T, VEC>(scale, i, s);
  if (bias) rows::load<T, VEC>(bias, i, b);
#pragma unroll
  for (int j = 0; j < VEC; ++j) {
    float o = (v[j] - mean) * inv;
    if (scale) o *= s[j];
    if (bias) o += b[j];
    out[j] = o;
  }
}

template <class T, int VEC, bool CACHED>
__global__ void norm_kernel(NormArgs a, int group) {
  __shared__ double sums[32];
  const T* __restrict__ x = static_cast<const T*>(a.x);
  const T* scale = static_cast<const T*>(a.scale);
  const T* bias = static_cast<const T*>(a.bias);
  T* __restrict__ y = static_cast<T*>(a.y);
  const rows::Walk w = rows::walk(group);
  const int64_t len = a.len, stride = int64_t{group} * VEC, start = int64_t{w.lane} * VEC;
  const double n = static_cast<double>(len);
  for (int64_t r = w.first; r < a.rows; r += w.step) {
    const T* xr = x + r * len;
    T* yr = y + r * len;
    float mean = 0.0f, inv;
    if constexpr (CACHED) {
      float v[kCachedPacks][VEC];
      float sum = 0.0f;
#pragma unroll
      for (int k = 0; k < kCachedPacks; ++k) {
        const int64_t i = start + k * stride;
        if (i < len) {
          rows::load<T, VEC>(xr, i, v[k]);
        } else {
#pragma unroll
          for (int j = 0; j < VEC; ++j) v[k][j] = 0.0f;
        }
#pragma unroll
        for (int j = 0; j < VEC; ++j) sum += v[k][j];
      }
      if (a.centered) mean = static_cast<float>(rows::group_sum(sum, sums, group) / n);
      float sq = 0.0f;
#pragma unroll
      for (int k = 0; k < kCachedPacks; ++k)
        if (start + k * stride < len)
#pragma unroll
          for (int j = 0; j < VEC; ++j) sq += (v[k][j] - mean) * (v[k][j] - mean);
      inv = 1.0f / sqrtf(static_cast<float>(rows::group_sum(sq, sums, group) / n) + a.epsilon);
#pragma unroll
      for (int k = 0; k < kCachedPacks; ++k) {
        const int64_t i = start + k * stride;
        if (i < len) {
          float out[VEC];
          normalize_pack<T, VEC>(scale, bias, i, mean, inv, v[k], out);
          rows::store<T, VEC>(yr, i, out);
        }
      }
    } else {
      if (a.centered) {
        double sum = 0.0;
        for (int64_t i = start; i < len; i += stride) {
          float v[VEC];
          rows::load<T, VEC>(xr, i, v);
#pragma unroll
          for (int j = 0; j < VEC; ++j) sum += v[j];
        }
        mean = static_cast<float>(rows::group_sum(sum, sums, group) / n);
      }
      double sq = 0.0;
      for (int64_t i = start; i < len; i += stride) {
        float v[VEC];
        rows::load<T, VEC>(xr, i, v);
#pragma unroll
        for (int j = 0; j < VEC; ++j) sq += (v[j] - mean) * (v[j] - mean);
      }
      inv = 1.0f / sqrtf(static_cast<float>(rows::group_sum(sq, sums, group) / n) + a.epsilon);
      for (int64_t i = start; i < len; i += stride) {
        float v[VEC], out[VEC];
        rows::load<T, VEC>(xr, i, v);
        normalize_pack<T, VEC>(scale, bias, i, mean, inv, v, out);
        rows::store<T, VEC>(yr, i, out);
      }
    }
    if (w.lane == 0) {
      if (a.mean) a.mean[r] = mean;
      if (a.inv_std) a.inv_std[r] = inv;
    }
  }
}

template <class T, int VEC, bool CACHED>
bool launch(const NormArgs& a, const RowGeometry& g, void* stream) noexcept {
  norm_kernel<T, VEC, CACHED>
      <<<g.grid, g.threads, 0, static_cast<cudaStream_t>(stream)>>>(a, g.group);
  return launch_succeeded();
}

template <class T>
NormLauncher pick(const RowGeometry& g) {
  constexpr int kVec = 16 / sizeof(T);
  if (g.vec == kVec) return g.cached ? &launch<T, kVec, true> : &launch<T, kVec, false>;
  if (g.vec == 1) return g.cached ? &launch<T, 1, true> : &launch<T, 1, false>;
  return nullptr;
}

}  // namespace

NormLauncher norm_launcher(DType dtype, const RowGeometry& g) {
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

}  // namespace eagle::native
