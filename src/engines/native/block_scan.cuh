// Internal, CUDA sources only: a block-wide exclusive scan of one int32 a thread (the embedding
// backward's counting sort). blockDim.x must be a multiple of 32, at most 1024.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace eagle::native::scan {

// Returns the sum of v over the threads before this one; *total gets the block's sum. `scratch`:
// 32 int32 of shared memory. Synchronises the block (every thread must call it); on return the
// scratch is free again.
__device__ __forceinline__ int32_t block_exclusive(int32_t v, int32_t* scratch, int32_t* total) {
  const int lane = static_cast<int>(threadIdx.x & 31), warp = static_cast<int>(threadIdx.x >> 5);
  const int warps = static_cast<int>(blockDim.x >> 5);
  int32_t x = v;  // inclusive scan inside the warp
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int32_t y = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o) x += y;
  }
  if (lane == 31) scratch[warp] = x;
  __syncthreads();
  if (warp == 0) {
    int32_t w = lane < warps ? scratch[lane] : 0;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int32_t y = __shfl_up_sync(0xffffffffu, w, o);
      if (lane >= o) w += y;
    }
    if (lane < warps) scratch[lane] = w;  // inclusive over warps; each lane its own entry
  }
  __syncthreads();
  const int32_t before = warp > 0 ? scratch[warp - 1] : 0;
  *total = scratch[warps - 1];
  __syncthreads();  // every thread has read the scratch
  return before + x - v;
}

}  // namespace eagle::native::scan
