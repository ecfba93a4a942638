// Internal, CUDA sources only: the grid of a persistent launch, whose CTAs each loop over tasks
// blockIdx.x, blockIdx.x + gridDim.x, ... instead of taking one task each (the flat schedule).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace eagle::native::linear_attention {

// Lowers `tasks` (the flat grid's first dimension) to the CTAs of `kernel` resident on the device
// at once, divided over the `others` CTAs of the grid's other dimensions, at least 1. Host calls
// only (no device sync): safe while a stream is captured. False when the runtime cannot say.
template <typename Kernel>
bool persistent_workers(Kernel kernel, int threads, std::size_t smem, unsigned others,
                        unsigned& tasks) {
  int device = 0, sms = 0, per_sm = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem) != cudaSuccess)
    return false;
  const int64_t resident = static_cast<int64_t>(sms) * (per_sm > 0 ? per_sm : 1) / others;
  const int64_t workers = resident > 1 ? resident : 1;
  if (workers < tasks) tasks = static_cast<unsigned>(workers);
  return true;
}

}  // namespace eagle::native::linear_attention
