// Internal, CUDA sources only: block-wide scans of one int32 a thread (the embedding backward's
// counting sort, the ragged layer's validation and chunk offsets). blockDim.x must be a multiple
// of 32, at most 1024. Every thread of the block must call; each call synchronises the block and
// leaves its 32-int32 shared `scratch` free again on return.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace eagle::block_scan {

struct Plus {
  __device__ int32_t operator()(int32_t a, int32_t b) const { return a + b; }
};
struct Max {
  __device__ int32_t operator()(int32_t a, int32_t b) const { return a > b ? a : b; }
};

struct Scanned {
  int32_t inclusive;  // op over this thread's value and every one before it
  int32_t exclusive;  // op over the threads before this one (`identity` for thread 0)
  int32_t total;      // op over the whole block
};

// The inclusive and exclusive scans of v under an associative `op` with `identity`.
template <class Op>
__device__ __forceinline__ Scanned scan(int32_t v, Op op, int32_t identity, int32_t* scratch) {
  const int lane = static_cast<int>(threadIdx.x & 31), warp = static_cast<int>(threadIdx.x >> 5);
  const int warps = static_cast<int>(blockDim.x >> 5);
  int32_t x = v;  // inclusive scan inside the warp
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const int32_t y = __shfl_up_sync(0xffffffffu, x, o);
    if (lane >= o) x = op(y, x);
  }
  const int32_t before_in_warp = __shfl_up_sync(0xffffffffu, x, 1);
  if (lane == 31) scratch[warp] = x;
  __syncthreads();
  if (warp == 0) {
    int32_t w = lane < warps ? scratch[lane] : identity;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int32_t y = __shfl_up_sync(0xffffffffu, w, o);
      if (lane >= o) w = op(y, w);
    }
    if (lane < warps) scratch[lane] = w;  // inclusive over warps; each lane its own entry
  }
  __syncthreads();
  const int32_t warp_prefix = warp > 0 ? scratch[warp - 1] : identity;
  Scanned s;
  s.inclusive = op(warp_prefix, x);
  s.exclusive = lane > 0 ? op(warp_prefix, before_in_warp) : warp_prefix;
  s.total = scratch[warps - 1];
  __syncthreads();  // every thread has read the scratch
  return s;
}

// The sum of v over the threads before this one; *total gets the block's sum.
__device__ __forceinline__ int32_t block_exclusive(int32_t v, int32_t* scratch, int32_t* total) {
  const Scanned s = scan(v, Plus{}, 0, scratch);
  *total = s.total;
  return s.exclusive;
}

}  // namespace eagle::block_scan
