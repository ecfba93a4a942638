#include "bench_kernels.hpp"

namespace eagle::bench {

namespace {

__global__ void raw_axpy_kernel(float* out, const float* x, const float* y, float alpha,
                                int64_t n) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n; i += stride)
    out[i] = alpha * x[i] + y[i];
}

}  // namespace

cudaError_t raw_axpy(float* out, const float* x, const float* y, float alpha, int64_t n,
                     unsigned grid, cudaStream_t stream) {
  raw_axpy_kernel<<<grid, kRawBlock, 0, stream>>>(out, x, y, alpha, n);
  return cudaGetLastError();
}

}  // namespace eagle::bench
