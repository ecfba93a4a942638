// CUDA implementations of the optimizer kernels. adamw: one launch over every tensor; each block
// takes a chunk of one tensor (blocks numbered over the tensors' chunks in order), so a tensor of
// any size shares the launch with the others. A chunk is 16 elements a thread, moved 16 bytes at
// a time where the tensor's four arrays are 16-byte aligned (a step reads 16 and writes 12 bytes
// an element: the launch is bound by memory, and each thread's step constants cost two pow()).
#include <algorithm>
#include <cstdint>
#include <utility>

#include "eagle/kernel/cuda_function.hpp"
#include "eagle/kernel/optim.hpp"
#include "kernel/adamw_impl.hpp"

namespace eagle::detail {

namespace {

constexpr int kThreads = 256;
constexpr int kPerThread = 16;
constexpr int64_t kChunk = int64_t{kThreads} * kPerThread;  // elements per block

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
  const int64_t begin = block * kChunk, end = std::min(n, begin + kChunk);
  int64_t scalar_from = begin;  // where the 16-byte part (if any) stops
  const auto aligned = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  if (aligned(p) && aligned(g) && aligned(m) && aligned(v)) {  // chunks start at multiples of 16
    const int64_t quads = (end - begin) / 4;
    for (int64_t q = threadIdx.x; q < quads; q += kThreads) {
      const int64_t i = begin + 4 * q;
      float4 pq = *reinterpret_cast<const float4*>(p + i);
      const float4 gq = *reinterpret_cast<const float4*>(g + i);
      float4 mq = *reinterpret_cast<const float4*>(m + i);
      float4 vq = *reinterpret_cast<const float4*>(v + i);
      adamw_update(s, pq.x, gq.x, mq.x, vq.x);
      adamw_update(s, pq.y, gq.y, mq.y, vq.y);
      adamw_update(s, pq.z, gq.z, mq.z, vq.z);
      adamw_update(s, pq.w, gq.w, mq.w, vq.w);
      *reinterpret_cast<float4*>(p + i) = pq;
      *reinterpret_cast<float4*>(m + i) = mq;
      *reinterpret_cast<float4*>(v + i) = vq;
    }
    scalar_from = begin + 4 * quads;
  }
  for (int64_t i = scalar_from + threadIdx.x; i < end; i += kThreads) {
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
