// Internal, CUDA sources only: what the row kernels share. A row is `len` contiguous elements;
// a group of threads (one warp, or the whole block) owns a row at a time and reduces across
// itself; elements move in packs of VEC (16 bytes when the row is aligned, 1 otherwise).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernel/cuda_numeric.cuh"

namespace eagle::native::rows {

// VEC elements of T loaded or stored as one access (16 bytes for the vectorized path).
template <class T, int VEC>
struct alignas(sizeof(T) * VEC) Pack {
  T v[VEC];
};

template <class T, int VEC>
__device__ __forceinline__ void load(const T* p, int64_t i, float (&out)[VEC]) {
  const Pack<T, VEC> pk = *reinterpret_cast<const Pack<T, VEC>*>(p + i);
#pragma unroll
  for (int j = 0; j < VEC; ++j) out[j] = detail::to_acc(pk.v[j]);
}

template <class T, int VEC>
__device__ __forceinline__ void store(T* p, int64_t i, const float (&in)[VEC]) {
  Pack<T, VEC> pk;
#pragma unroll
  for (int j = 0; j < VEC; ++j) pk.v[j] = detail::from_acc<T>(in[j]);
  *reinterpret_cast<Pack<T, VEC>*>(p + i) = pk;
}

struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct Sum {
  __device__ float operator()(float a, float b) const { return a + b; }
};

// Reduces `v` across the group owning this thread's row: a warp (group == 32) by shuffles, or
// the whole block (group == blockDim.x) through `scratch` (32 values of shared memory). Every
// thread of the group gets the result. Block groups synchronise: every thread must call it.
template <class V, class Op>
__device__ __forceinline__ V group_reduce(V v, Op op, V* scratch, int group) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (group <= 32) return v;
  const int warp = threadIdx.x >> 5, warps = group >> 5;
  if ((threadIdx.x & 31) == 0) scratch[warp] = v;
  __syncthreads();
  V r = scratch[0];
  for (int w = 1; w < warps; ++w) r = op(r, scratch[w]);
  __syncthreads();  // the scratch is free for the next reduction
  return r;
}

// The sum of `v` over the group, in double: row sums of thousands of terms keep the
// reference's digits (`scratch`: 32 doubles of shared memory).
__device__ __forceinline__ double group_sum(double v, double* scratch, int group) {
  return group_reduce(
      v, [](double a, double b) { return a + b; }, scratch, group);
}

// Folds x into a running (max m, sum s of exp(. - m)), s in double. An -inf element adds
// nothing (exp(-inf - -inf) would be NaN); a NaN makes s NaN.
__device__ __forceinline__ void online(float x, float& m, double& s) {
  if (x > m) {
    s = s * static_cast<double>(expf(m - x)) + 1.0;
    m = x;
  } else if (x != -INFINITY) {
    s += static_cast<double>(expf(x - m));
  }
}

// A thread's (m, s) moved to the row's max before the group adds them.
__device__ __forceinline__ double rescaled(float m, double s, float row_max) {
  return m == -INFINITY ? 0.0 : s * static_cast<double>(expf(m - row_max));
}

// Folds a pack into a running (max m, sum s of exp(. - m)): the pack's max in float, one rescale
// of s, the pack's exponentials added in float and then once into s (no branch per element).
// -inf elements add nothing; a NaN makes s NaN, so s is 0 or NaN while m is still -inf.
template <int VEC>
__device__ __forceinline__ void online_pack(const float (&v)[VEC], float& m, double& s) {
  float pack_max = v[0];
#pragma unroll
  for (int j = 1; j < VEC; ++j) pack_max = fmaxf(pack_max, v[j]);
  const float next = fmaxf(m, pack_max);
  // All -inf so far: shift by 0 (exp(-inf - -inf) would be NaN), which adds the zeros it should.
  const float shift = next == -INFINITY ? 0.0f : next;
  float pack_sum = 0.0f;
#pragma unroll
  for (int j = 0; j < VEC; ++j) pack_sum += expf(v[j] - shift);
  s = s * static_cast<double>(expf(m - shift)) + static_cast<double>(pack_sum);
  m = next;
}

// A thread's (m, s) from online_pack moved to the group's max before the group adds them; a
// thread that saw nothing but -inf and NaN passes its s (0 or NaN) on.
__device__ __forceinline__ double shifted_sum(float m, double s, float group_max) {
  return m == -INFINITY ? s : s * static_cast<double>(expf(m - group_max));
}

// log(sum(exp(x))) from the row's max and the sum shifted by it. An infinite max is the answer
// itself (all -inf, or a +inf), as in the reference.
__device__ __forceinline__ float finish_lse(float m, double s) {
  return isinf(m) ? m : m + logf(static_cast<float>(s));
}

// The row geometry of a launch: which row a group starts on and how far it strides.
struct Walk {
  int64_t first, step;
  int lane;  // this thread's index in its group
};
__device__ __forceinline__ Walk walk(int group) {
  const int groups_per_block = blockDim.x / group;
  const int g = threadIdx.x / group;
  return {static_cast<int64_t>(blockIdx.x) * groups_per_block + g,
          static_cast<int64_t>(gridDim.x) * groups_per_block,
          static_cast<int>(threadIdx.x % group)};
}

// Blocks for one row per group: the hardware starts each block as another finishes, so no wave
// is left part-empty when fewer blocks fit an SM than a persistent grid assumed.
inline unsigned one_row_per_group_grid(int64_t rows, int threads, int group) {
  const int64_t per_block = threads / group;
  const int64_t blocks = (rows + per_block - 1) / per_block;
  return static_cast<unsigned>(blocks < 1 ? 1 : blocks > 0x7fffffff ? 0x7fffffff : blocks);
}

}  // namespace eagle::native::rows
