// The schedules' tile offsets of the varlen attention kernels: one launch, one block per offsets
// array (N + 1 boundaries each, ragged::block_chunk_offsets), before the kernels that read them.
#include <cuda_runtime.h>

#include "engines/native/attention/varlen_kernels.hpp"
#include "ragged/block_schedule.cuh"

namespace eagle::native::attention {

namespace {

constexpr int kMaxJobs = 3;

struct Jobs {
  TileOffsetsJob job[kMaxJobs];
};

constexpr int kThreads = 1024;

__global__ void __launch_bounds__(kThreads)
    tile_offsets_kernel(const __grid_constant__ Jobs jobs, int64_t slots) {
  const TileOffsetsJob& j = jobs.job[blockIdx.x];
  ragged::block_chunk_offsets(j.cu, slots, j.rows, j.block, j.out);
}

}  // namespace

bool tile_offsets_launch(const TileOffsetsJob* jobs, int count, int64_t slots,
                         void* stream) noexcept {
  if (count < 1 || count > kMaxJobs || slots < 1) return false;
  Jobs all{};
  for (int i = 0; i < count; ++i) {
    if (!jobs[i].cu || !jobs[i].out || jobs[i].block < 1 || jobs[i].rows < 0) return false;
    all.job[i] = jobs[i];
  }
  tile_offsets_kernel<<<count, kThreads, 0, static_cast<cudaStream_t>(stream)>>>(all, slots);
  return cudaPeekAtLastError() == cudaSuccess;
}

}  // namespace eagle::native::attention
