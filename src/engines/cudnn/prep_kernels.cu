#include <cuda_runtime.h>

#include <algorithm>

#include "engines/cudnn/prep_kernels.hpp"

namespace eagle::cudnn {

namespace {

__device__ int64_t read_cu(const void* cu, int is64, int64_t i, int64_t rows) {
  const int64_t v = is64 ? static_cast<const int64_t*>(cu)[i] : static_cast<const int32_t*>(cu)[i];
  // Clamped so that no cu_seqlens value, however wrong, sends cuDNN outside the buffer.
  return v < 0 ? 0 : (v > rows ? rows : v);
}

// Zeroes the kv rows of sequence `seq` in the zero buffers when it has no query rows; the blocks
// of grid row `seq` share the bytes (16 at a time where rows allow).
__device__ void zero_kv_rows_without_queries(const RaggedPrepArgs& a, int64_t seq) {
  const int64_t q0 = read_cu(a.cu_q, a.cu_is64, seq, a.rows_q);
  const int64_t q1 = read_cu(a.cu_q, a.cu_is64, seq + 1, a.rows_q);
  const int64_t kv0 = read_cu(a.cu_kv, a.cu_is64, seq, a.rows_kv);
  const int64_t kv1 = read_cu(a.cu_kv, a.cu_is64, seq + 1, a.rows_kv);
  if (q1 > q0 || kv1 <= kv0) return;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int z = 0; z < a.n_zero; ++z) {
    char* base = static_cast<char*>(a.zero[z]) + kv0 * a.zero_row_pitch[z];
    const int64_t row = a.zero_row_bytes[z], pitch = a.zero_row_pitch[z];
    if (row % 16 == 0 && pitch % 16 == 0 && reinterpret_cast<uintptr_t>(a.zero[z]) % 16 == 0) {
      const int64_t per_row = row / 16;
      for (int64_t i = tid; i < (kv1 - kv0) * per_row; i += step)
        reinterpret_cast<int4*>(base + i / per_row * pitch)[i % per_row] = make_int4(0, 0, 0, 0);
    } else {
      for (int64_t i = tid; i < (kv1 - kv0) * row; i += step) base[i / row * pitch + i % row] = 0;
    }
  }
}

// Grid row 0: one thread per entry b in [0, B]. Grid row y > 0 (backward): the zeroing of
// sequence y - 1.
__global__ void ragged_prep(RaggedPrepArgs a) {
  if (blockIdx.y > 0) {
    zero_kv_rows_without_queries(a, static_cast<int64_t>(blockIdx.y) - 1);
    return;
  }
  const int64_t b = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b > a.batch) return;
  const int64_t q = read_cu(a.cu_q, a.cu_is64, b, a.rows_q);
  const int64_t kv = read_cu(a.cu_kv, a.cu_is64, b, a.rows_kv);
  if (b < a.batch) {
    const int64_t q_next = read_cu(a.cu_q, a.cu_is64, b + 1, a.rows_q);
    const int64_t kv_next = read_cu(a.cu_kv, a.cu_is64, b + 1, a.rows_kv);
    a.seq_len_q[b] = static_cast<int32_t>(q_next > q ? min(q_next - q, a.max_len_q) : 0);
    a.seq_len_kv[b] = static_cast<int32_t>(kv_next > kv ? min(kv_next - kv, a.max_len_kv) : 0);
  }
  for (int j = 0; j < a.n_offsets; ++j) a.offsets[j][b] = (a.kv_side[j] ? kv : q) * a.row_elems[j];
}

__global__ void stats_copy(StatsCopyArgs a) {
  const int64_t n = a.batch * a.heads * a.seq;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const int64_t s = i % a.seq, h = i / a.seq % a.heads, b = i / (a.seq * a.heads);
    a.dst[i] = a.src[b * a.stride_b + s * a.stride_s + h * a.stride_h];
  }
}

}  // namespace

PrepLaunch ragged_prep_launch(const RaggedPrepArgs& args) {
  PrepLaunch l;
  l.kernel = reinterpret_cast<const void*>(&ragged_prep);
  l.block = 128;
  l.grid = static_cast<unsigned>((args.batch + 1 + l.block - 1) / l.block);
  // The zeroing rows take at least 8 blocks each, so a long sequence is not one block's work.
  if (args.n_zero > 0) {
    l.grid = std::max(l.grid, 8u);
    l.grid_y = static_cast<unsigned>(args.batch + 1);
  }
  return l;
}

PrepLaunch stats_copy_launch(const StatsCopyArgs& args, int multiprocessors) {
  PrepLaunch l;
  l.kernel = reinterpret_cast<const void*>(&stats_copy);
  l.block = 256;
  const int64_t n = args.batch * args.heads * args.seq;
  l.grid = static_cast<unsigned>(
      std::clamp<int64_t>((n + l.block - 1) / l.block, 1, std::max(1, multiprocessors) * 8));
  return l;
}

bool launch_prep(const PrepLaunch& launch, const void* args, void* stream) noexcept {
  void* params[] = {const_cast<void*>(args)};
  return cudaLaunchKernel(launch.kernel, dim3(launch.grid, launch.grid_y), dim3(launch.block),
                          params, 0, static_cast<cudaStream_t>(stream)) == cudaSuccess;
}

}  // namespace eagle::cudnn
