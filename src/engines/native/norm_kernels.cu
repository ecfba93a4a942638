#include "engines/native/dtype_dispatch.cuh"
#include "engines/native/launch_status.hpp"
#include "engines/native/norm_kernels.hpp"
#include "engines/native/pack_io.cuh"
#include "engines/native/row_stats.cuh"
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

// One row per group. Cached: the row's packs kept as loaded (16-bit packs stay packed), at most
// 64 registers (8 blocks of 128 an SM; a cached block of 1024 can launch); one barrier per group
// sum (double-buffered scratch): two a row for layer_norm, one for rms_norm. y leaves as one
// 16-byte store a pack (pack_io); a null y (a recompute that wants the statistics alone) is not
// written.
template <class T, int VEC, bool CACHED>
__global__ void __maxnreg__(64) norm_kernel(NormArgs a, int group) {
  __shared__ double sums[2][32];
  const T* __restrict__ x = static_cast<const T*>(a.x);
  const T* scale = static_cast<const T*>(a.scale);
  const T* bias = static_cast<const T*>(a.bias);
  T* __restrict__ y = static_cast<T*>(a.y);
  const rows::Walk w = rows::walk(group);
  const int64_t len = a.len, stride = int64_t{group} * VEC, start = int64_t{w.lane} * VEC;
  const double n = static_cast<double>(len);
  int parity = 0;
  for (int64_t r = w.first; r < a.rows; r += w.step) {
    const T* xr = x + r * len;
    T* yr = y + r * len;
    float mean = 0.0f, inv;
    if constexpr (CACHED) {
      // A cached row has at most 1024 x kCachedPacks packs: 32-bit offsets.
      const int lim = static_cast<int>(len), lane0 = static_cast<int>(start);
      const int step = static_cast<int>(stride);
      pack_io::Raw<T, VEC> raw[kCachedPacks];
#pragma unroll
      for (int k = 0; k < kCachedPacks; ++k) {
        const int i = lane0 + k * step;
        if (i < lim) raw[k] = pack_io::load_raw<T, VEC>(xr, i);
      }
      if (a.centered) {
        float sum = 0.0f;
#pragma unroll
        for (int k = 0; k < kCachedPacks; ++k) {
          if (lane0 + k * step < lim) {
            float v[VEC];
            pack_io::unpack_raw<T, VEC>(raw[k], v);
#pragma unroll
            for (int j = 0; j < VEC; ++j) sum += v[j];
          }
        }
        mean = static_cast<float>(row_stats::group_sum1(sum, sums[parity], group) / n);
        parity ^= 1;
      }
      float sq = 0.0f;
#pragma unroll
      for (int k = 0; k < kCachedPacks; ++k) {
        if (lane0 + k * step < lim) {
          float v[VEC];
          pack_io::unpack_raw<T, VEC>(raw[k], v);
#pragma unroll
          for (int j = 0; j < VEC; ++j) sq += (v[j] - mean) * (v[j] - mean);
        }
      }
      inv = 1.0f / sqrtf(static_cast<float>(row_stats::group_sum1(sq, sums[parity], group) / n) +
                         a.epsilon);
      parity ^= 1;
#pragma unroll
      for (int k = 0; k < kCachedPacks; ++k) {
        const int i = lane0 + k * step;
        if (y && i < lim) {
          float v[VEC], out[VEC];
          pack_io::unpack_raw<T, VEC>(raw[k], v);
          normalize_pack<T, VEC>(scale, bias, i, mean, inv, v, out);
          pack_io::store<T, VEC>(yr, i, out);
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
        mean = static_cast<float>(row_stats::group_sum1(sum, sums[parity], group) / n);
        parity ^= 1;
      }
      double sq = 0.0;
      for (int64_t i = start; i < len; i += stride) {
        float v[VEC];
        rows::load<T, VEC>(xr, i, v);
#pragma unroll
        for (int j = 0; j < VEC; ++j) sq += (v[j] - mean) * (v[j] - mean);
      }
      inv = 1.0f / sqrtf(static_cast<float>(row_stats::group_sum1(sq, sums[parity], group) / n) +
                         a.epsilon);
      parity ^= 1;
      for (int64_t i = start; y && i < len; i += stride) {
        float v[VEC], out[VEC];
        rows::load<T, VEC>(xr, i, v);
        normalize_pack<T, VEC>(scale, bias, i, mean, inv, v, out);
        pack_io::store<T, VEC>(yr, i, out);
      }
    }
    if (w.lane == 0) {
      if (a.mean) a.mean[r] = mean;
      if (a.inv_std) a.inv_std[r] = inv;
    }
  }
}

// Cached rows: one row per group (blocks start as others finish; the geometry's persistent grid
// of 16 blocks an SM ran 2.7 rounds at 6 resident, the last part-empty). Streamed rows keep it.
template <class T, int VEC, bool CACHED>
bool launch(const NormArgs& a, const RowGeometry& g, void* stream) noexcept {
  const unsigned grid = CACHED ? rows::one_row_per_group_grid(a.rows, g.threads, g.group) : g.grid;
  norm_kernel<T, VEC, CACHED>
      <<<grid, g.threads, 0, static_cast<cudaStream_t>(stream)>>>(a, g.group);
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
  return by_float_dtype(dtype, [&]<class T>() { return pick<T>(g); });
}

}  // namespace eagle::native
