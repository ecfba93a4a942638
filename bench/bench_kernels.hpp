// Raw CUDA peers of eagle's kernels: no eagle types, no argument block. CUDA builds only.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace eagle::bench {

inline constexpr unsigned kRawBlock = 256;  // eagle's elementwise block size

// out = alpha * x + y over n floats, launched with <<<grid, kRawBlock, 0, stream>>> as a
// grid-stride loop like eagle's axpy. Returns the launch's error (cudaGetLastError).
cudaError_t raw_axpy(float* out, const float* x, const float* y, float alpha, int64_t n,
                     unsigned grid, cudaStream_t stream);

}  // namespace eagle::bench
