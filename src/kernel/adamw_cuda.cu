// CUDA implementations of the optimizer kernels. adamw: one launch over every tensor; each block
// takes a chunk of one tensor (blocks numbered over the tensors' chunks in order), so a tensor of
// any size shares the launch with the others.
#include <algorithm>
#include <utility>

#include "eagle/kernel/cuda_function.hpp"
#include "eagle/kernel/optim.hpp"
#include "kernel/adamw_impl.hpp"

namespace eagle::detail {

namespace {

constexpr int kThreads = 256;
constexpr int64_t kChunk = kThreads * 4;  // elements per block

__global__ void step_count_kernel(const KernelArgsN<1, 0> a) {
  *static_cast<int64_t*>(a.arrays[0].data) += 1;
}

template <int N>
__global__ void adamw_kernel(const KernelArgsN<1 + 4 * N, kAdamwScalars> a) {
  // Which tensor and which chunk of it this block takes.
  int64_t block = blockIdx.x;
  int tensor = 0;
  for (; tensor < N; ++tensor) {
    const int64_t chunks = (a.arrays[adamw_slot(tensor, 0)].numel + kChunk - 1) / kChunk;
    if (block < chunks) break;
    block -= chunks;
  }
  if (tensor == N) return;
  const AdamwStep s = adamw_step(a);
  float* p = static_cast<float*>(a.arrays[adamw_slot(tensor, kAdamwParam)].data);
  const float* g = static_cast<const float*>(a.arrays[adamw_slot(tensor, kAdamwGrad)].data);
  float* m = static_cast<float*>(a.arrays[adamw_slot(tensor, kAdamwM)].data);
  float* v = static_cast<float*>(a.arrays[adamw_slot(tensor, kAdamwV)].data);
  const int64_t n = a.arrays[adamw_slot(tensor, 0)].numel;
  const int64_t end = std::min(n, (block + 1) * kChunk);
  for (int64_t i = block * kChunk + threadIdx.x; i < end; i += kThreads) {
    float pi = p[i], mi = m[i], vi = v[i];
    adamw_update(s, pi, g[i], mi, vi);
    p[i] = pi;
    m[i] = mi;
    v[i] = vi;
  }
}

CudaLaunchShape adamw_shape(const KernelArgs& a, const DeviceProperties&) {
  int64_t blocks = 0;
  for (int j = 0; j < (a.num_arrays - 1) / 4; ++j)
    blocks += (a.arrays[adamw_slot(j, 0)].numel + kChunk - 1) / kChunk;
  CudaLaunchShape s;
  s.grid[0] = static_cast<unsigned>(std::max<int64_t>(1, blocks));
  s.block[0] = kThreads;
  return s;
}

CudaLaunchShape one_thread(const KernelArgs&, const DeviceProperties&) {
  return {};
}

template <std::size_t... I>
CudaFunction adamw_of(int tensors, std::index_sequence<I...>) {
  const CudaFunction table[] = {cuda_function(&adamw_kernel<static_cast<int>(I) + 1>)...};
  return tensors >= 1 && tensors <= static_cast<int>(sizeof...(I)) ? table[tensors - 1]
                                                                   : CudaFunction{};
}

}  // namespace

void attach_cuda_adamw(KernelImpl& impl, int tensors) {
  impl.cuda_function = adamw_of(tensors, std::make_index_sequence<kernels::kAdamwMaxTensors>());
  impl.cuda_shape = &adamw_shape;
}

void attach_cuda_step_count(KernelImpl& impl) {
  impl.cuda_function = cuda_function(&step_count_kernel);
  impl.cuda_shape = &one_thread;
}

}  // namespace eagle::detail
