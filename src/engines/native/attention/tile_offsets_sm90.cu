// The schedules' tile offsets of the varlen attention kernels: one launch, one thread per
// offsets array (N + 1 boundaries each), before the kernels that read them.
#include <cuda_runtime.h>

#include "eagle/ragged/schedule.hpp"
#include "engines/native/attention/varlen_kernels.hpp"

namespace eagle::native::attention {

namespace {

constexpr int kMaxJobs = 3;

struct Jobs {
  TileOffsetsJob job[kMaxJobs];
};

__global__ void tile_offsets_kernel(Jobs jobs, int count, int64_t slots) {
  const int i = static_cast<int>(threadIdx.x);
  if (i >= count) return;
  const TileOffsetsJob& j = jobs.job[i];
  ragged::scan_chunk_offsets(j.cu, slots, j.rows, j.block, j.out);
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
  tile_offsets_kernel<<<1, 32, 0, static_cast<cudaStream_t>(stream)>>>(all, count, slots);
  return cudaPeekAtLastError() == cudaSuccess;
}

}  // namespace eagle::native::attention
