#include "bench_kernels.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "eagle/kernel/args.hpp"
#include "eagle/kernel/cuda_function.hpp"

namespace eagle::bench {

namespace {

__global__ void raw_axpy_kernel(float* out, const float* x, const float* y, float alpha,
                                int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride)
    out[i] = alpha * x[i] + y[i];
}

__device__ __forceinline__ float step_value(float v, float alpha, float y, int iters) {
  for (int k = 0; k < iters; ++k) v = fmaf(v, alpha, y);
  return v;
}

__global__ void raw_step_kernel(float* out, const float* x, const float* y, float alpha, int iters,
                                int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride)
    out[i] = step_value(x[i], alpha, y[i], iters);
}

__device__ __forceinline__ double hashed_unit(uint64_t i, uint64_t seed) {
  uint64_t z = i + seed * 0x9E3779B97F4A7C15ull;  // splitmix64
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53;
}

__global__ void raw_fill_uniform_kernel(void* data, int kind, int64_t n, double lo, double hi,
                                        uint64_t seed) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += stride) {
    double v = lo + (hi - lo) * hashed_unit(static_cast<uint64_t>(i), seed);
    if (kind <= 2 && v == 0) v = hi;
    switch (kind) {
      case 0:
        static_cast<float*>(data)[i] = static_cast<float>(v);
        break;
      case 1:
        static_cast<__half*>(data)[i] = __float2half_rn(static_cast<float>(v));
        break;
      case 2:
        static_cast<__nv_bfloat16*>(data)[i] = __float2bfloat16_rn(static_cast<float>(v));
        break;
      case 3:
        static_cast<int32_t*>(data)[i] = static_cast<int32_t>(floor(v));
        break;
      case 5:
        static_cast<uint8_t*>(data)[i] = static_cast<uint8_t>(floor(v));
        break;
      default:
        static_cast<int64_t*>(data)[i] = static_cast<int64_t>(floor(v));
        break;
    }
  }
}

__global__ void raw_fill_u32_kernel(uint32_t* cell, uint32_t value) {
  *cell = value;
}

__global__ void raw_countdown_kernel(uint32_t* remaining, uint32_t* cell) {
  const uint32_t r = *remaining - 1;
  *remaining = r;
  *cell = r > 0 ? 1u : 0u;
}

__global__ void raw_countdown_set_kernel(uint32_t* remaining, uint32_t* cell,
                                         cudaGraphConditionalHandle handle) {
  const uint32_t r = *remaining - 1;
  *remaining = r;
  *cell = r > 0 ? 1u : 0u;
  cudaGraphSetConditional(handle, r > 0 ? 1u : 0u);
}

__global__ void raw_setter_kernel(const uint32_t* cell, cudaGraphConditionalHandle handle) {
  cudaGraphSetConditional(handle, *cell != 0 ? 1u : 0u);
}

// The benchmark's eagle kernels (bench_control.cpp): the same bodies behind the argument block.
__global__ void countdown_cuda(const KernelArgsN<2, 0> a) {
  uint32_t* remaining = static_cast<uint32_t*>(a.arrays[0].data);
  const uint32_t r = *remaining - 1;
  *remaining = r;
  *static_cast<uint32_t*>(a.arrays[1].data) = r > 0 ? 1u : 0u;
}

// Arrays: x, y, after (ordering only, never read), out. Scalars: alpha, iters.
__global__ void step_cuda(const KernelArgsN<4, 2> a) {
  const float* x = static_cast<const float*>(a.arrays[0].data);
  const float* y = static_cast<const float*>(a.arrays[1].data);
  float* out = static_cast<float*>(a.arrays[3].data);
  const int64_t n = a.arrays[3].numel;
  const float alpha = static_cast<float>(a.scalars[0].f);
  const int iters = static_cast<int>(a.scalars[1].i);
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride)
    out[i] = step_value(x[i], alpha, y[i], iters);
}

cudaError_t add_node(cudaGraphNode_t* node, cudaGraph_t graph, const RawDeps& deps, const void* fn,
                     unsigned grid, unsigned block, void** args) {
  cudaKernelNodeParams p{};
  p.func = const_cast<void*>(fn);
  p.gridDim = dim3(grid);
  p.blockDim = dim3(block);
  p.kernelParams = args;  // copied by the runtime when the node is added
  return cudaGraphAddKernelNode(node, graph, deps.data(), deps.size(), &p);
}

}  // namespace

cudaError_t raw_axpy(float* out, const float* x, const float* y, float alpha, int64_t n,
                     unsigned grid, cudaStream_t stream) {
  raw_axpy_kernel<<<grid, kRawBlock, 0, stream>>>(out, x, y, alpha, n);
  return cudaGetLastError();
}

cudaError_t raw_step(float* out, const float* x, const float* y, float alpha, int iters, int64_t n,
                     unsigned grid, cudaStream_t stream) {
  raw_step_kernel<<<grid, kRawBlock, 0, stream>>>(out, x, y, alpha, iters, n);
  return cudaGetLastError();
}

cudaError_t add_raw_axpy_node(cudaGraphNode_t* node, cudaGraph_t graph, const RawDeps& deps,
                              float* out, const float* x, const float* y, float alpha, int64_t n,
                              unsigned grid) {
  void* args[] = {&out, &x, &y, &alpha, &n};
  return add_node(node, graph, deps, reinterpret_cast<const void*>(&raw_axpy_kernel), grid,
                  kRawBlock, args);
}

cudaError_t add_raw_fill_u32_node(cudaGraphNode_t* node, cudaGraph_t graph, const RawDeps& deps,
                                  uint32_t* cell, uint32_t value) {
  void* args[] = {&cell, &value};
  return add_node(node, graph, deps, reinterpret_cast<const void*>(&raw_fill_u32_kernel), 1, 1,
                  args);
}

cudaError_t add_raw_countdown_node(cudaGraphNode_t* node, cudaGraph_t graph, const RawDeps& deps,
                                   uint32_t* remaining, uint32_t* cell) {
  void* args[] = {&remaining, &cell};
  return add_node(node, graph, deps, reinterpret_cast<const void*>(&raw_countdown_kernel), 1, 1,
                  args);
}

cudaError_t add_raw_countdown_set_node(cudaGraphNode_t* node, cudaGraph_t graph,
                                       const RawDeps& deps, uint32_t* remaining, uint32_t* cell,
                                       cudaGraphConditionalHandle handle) {
  void* args[] = {&remaining, &cell, &handle};
  return add_node(node, graph, deps, reinterpret_cast<const void*>(&raw_countdown_set_kernel), 1, 1,
                  args);
}

cudaError_t add_raw_setter_node(cudaGraphNode_t* node, cudaGraph_t graph, const RawDeps& deps,
                                const uint32_t* cell, cudaGraphConditionalHandle handle) {
  void* args[] = {&cell, &handle};
  return add_node(node, graph, deps, reinterpret_cast<const void*>(&raw_setter_kernel), 1, 1, args);
}

CudaFunction countdown_cuda_function() {
  return cuda_function(&countdown_cuda);
}
CudaFunction step_cuda_function() {
  return cuda_function(&step_cuda);
}

cudaError_t raw_fill_uniform(void* data, int kind, int64_t n, double lo, double hi, uint64_t seed,
                             cudaStream_t stream) {
  raw_fill_uniform_kernel<<<1024, kRawBlock, 0, stream>>>(data, kind, n, lo, hi, seed);
  return cudaGetLastError();
}

}  // namespace eagle::bench
