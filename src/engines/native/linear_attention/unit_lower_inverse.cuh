// Internal, CUDA sources only: the inverse of I + A for the strictly lower 64 x 64 matrix A of a
// chunk (the WY / UT transform of the chunked delta rules), in f32 in shared memory.
#pragma once

namespace eagle::native::linear_attention {

// t = (I + a)^-1 for a strictly lower 64 x 64 `a` (both leading dimension `ld`), by 16 x 16
// blocks: the four diagonal blocks by substitution at once (a thread per column, in registers),
// then the blocks below them one block diagonal at a time (distance d = I - J):
// T_IJ = -T_II sum_{M = J}^{I - 1} A_IM T_MJ, the sums kept in `scratch` (3 x 256 floats).
// Every thread of the block (Threads >= 64) calls it; it ends with a __syncthreads.
template <int Threads>
__device__ __forceinline__ void invert_unit_lower_64(const float* a, float* t, int ld,
                                                     float* scratch) {
  const int tid = threadIdx.x;
  if (tid < 64) {
    const int blk = tid >> 4, nn = tid & 15, o = 16 * blk;
    float x[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      float s = i == nn ? 1.f : 0.f;
#pragma unroll
      for (int m = 0; m < i; ++m) s -= a[(o + i) * ld + o + m] * x[m];
      x[i] = s;
    }
#pragma unroll
    for (int i = 0; i < 16; ++i) t[(o + i) * ld + o + nn] = x[i];
  }
  for (int i = tid; i < 64 * 64; i += Threads) {
    const int r = i / 64, c = i % 64;
    if (c / 16 > r / 16) t[r * ld + c] = 0.f;
  }
  __syncthreads();
  for (int d = 1; d < 4; ++d) {
    for (int i = tid; i < (4 - d) * 256; i += Threads) {
      const int J = i / 256, I = J + d, r = (i % 256) / 16, c = i % 16;
      float s = 0;
      for (int m = 16 * J; m < 16 * I; ++m) s += a[(16 * I + r) * ld + m] * t[m * ld + 16 * J + c];
      scratch[i] = s;
    }
    __syncthreads();
    for (int i = tid; i < (4 - d) * 256; i += Threads) {
      const int J = i / 256, I = J + d, r = (i % 256) / 16, c = i % 16;
      float s = 0;
      for (int m = 0; m < 16; ++m)
        s += t[(16 * I + r) * ld + 16 * I + m] * scratch[J * 256 + m * 16 + c];
      t[(16 * I + r) * ld + 16 * J + c] = -s;
    }
    __syncthreads();
  }
}

}  // namespace eagle::native::linear_attention
