// Internal, CUDA sources only: row statistics the norm backward and the cross_entropy forward
// share, kept apart from rows.cuh (to be merged into it). Sums run in float within a thread over
// a pack or a few, and fold into double once per pack (or per few packs) and across threads, so
// the digits stay near the float64 reference without a double operation per element.
#pragma once

#include <cuda_runtime.h>

#include <cmath>

namespace eagle::native::row_stats {

// Two sums reduced together: one barrier a row instead of one per sum.
struct Sum2 {
  double a, b;
};

// Sums (a, b) across the group owning this thread's row: a warp (group <= 32) by shuffles, or
// the whole block (group == blockDim.x) through `scratch` (32 entries). Block groups: every
// thread must call it, and successive calls must alternate between two scratch buffers (the
// caller passes buffers[parity]), so no barrier is needed after the reads.
__device__ __forceinline__ Sum2 group_sum2(Sum2 v, Sum2* scratch, int group) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    v.a += __shfl_xor_sync(0xffffffffu, v.a, o);
    v.b += __shfl_xor_sync(0xffffffffu, v.b, o);
  }
  if (group <= 32) return v;
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
  __syncthreads();
  Sum2 r = scratch[0];
  for (int w = 1; w < (group >> 5); ++w) {  // fixed order: every thread gets the same digits
    r.a += scratch[w].a;
    r.b += scratch[w].b;
  }
  return r;
}

// A 16-byte copy from global to shared memory that completes asynchronously (cp.async, sm_80+;
// a plain copy before): the copies a thread issued between two commits form a group, and
// cp_async_wait<N> waits until at most N of the thread's groups are still pending. A thread sees
// its own completed copies after the wait; other threads need a barrier as well.
__device__ __forceinline__ void cp_async16(void* smem, const void* global) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const auto dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(global) : "memory");
#else
  *static_cast<uint4*>(smem) = *static_cast<const uint4*>(global);
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#endif
}

// Sums v across the block (group == blockDim.x, a multiple of 32) through `scratch` (32 doubles)
// with one barrier: successive calls must alternate between two scratch buffers (the caller
// passes buffers[parity]). A warp group (group <= 32) needs no scratch.
__device__ __forceinline__ double group_sum1(double v, double* scratch, int group) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (group <= 32) return v;
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
  __syncthreads();
  double r = scratch[0];
  for (int w = 1; w < (group >> 5); ++w) r += scratch[w];  // fixed order
  return r;
}

// A running log-sum-exp: the max m seen so far and s = sum of exp(x - m) in double.
struct Lse {
  float m = -INFINITY;
  double s = 0.0;
};

// The subtrahend of exp(x - shift) for a block of values whose max is `m`: an all -inf block
// shifts by 0, so its exps are 0 instead of exp(-inf + inf) = NaN.
__device__ __forceinline__ float lse_shift(float m) {
  return m == -INFINITY ? 0.0f : m;
}

// Folds N values into `acc` with one rescale: their max in float (fmaxf skips NaN, as the
// per-element compare did), their exps summed in float, added to the double sum once. A NaN
// value makes s NaN; -inf values add nothing; a +inf max leaves s NaN or finite, and the lse is
// that max either way (finish).
template <int N>
__device__ __forceinline__ void lse_fold(const float (&v)[N], Lse& acc) {
  float bm = v[0];
#pragma unroll
  for (int j = 1; j < N; ++j) bm = fmaxf(bm, v[j]);
  const float m = fmaxf(acc.m, bm), shift = lse_shift(m);
  float bs = 0.0f;
#pragma unroll
  for (int j = 0; j < N; ++j) bs += expf(v[j] - shift);
  // acc.s is 0 while acc.m is -inf: scale it by exp(-inf) = 0, never by NaN.
  acc.s = acc.s * static_cast<double>(expf(acc.m - shift)) + static_cast<double>(bs);
  acc.m = m;
}

// acc's sum moved to `row_max` before the group adds it.
__device__ __forceinline__ double lse_rescaled(const Lse& acc, float row_max) {
  return acc.m == -INFINITY ? 0.0 : acc.s * static_cast<double>(expf(acc.m - row_max));
}

// Warp-wide max and rescaled sum of the lanes' (m, s), and the warp sum of `plain`: every lane
// gets them.
__device__ __forceinline__ void warp_lse(Lse& acc, double& plain) {
  float row_max = acc.m;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    row_max = fmaxf(row_max, __shfl_xor_sync(0xffffffffu, row_max, o));
  double s = lse_rescaled(acc, row_max);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    s += __shfl_xor_sync(0xffffffffu, s, o);
    plain += __shfl_xor_sync(0xffffffffu, plain, o);
  }
  acc = {row_max, s};
}

}  // namespace eagle::native::row_stats
