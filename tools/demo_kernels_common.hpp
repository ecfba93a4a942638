// The arithmetic of heat_step for one grid point, shared by the CPU and CUDA versions.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define EAGLE_DEMO_HD __host__ __device__ __forceinline__
#else
#define EAGLE_DEMO_HD inline
#endif

namespace eagle::demo {

template <class T>
EAGLE_DEMO_HD T heat_point(const T* u, int64_t rows, int64_t cols, int64_t r, int64_t c, T alpha) {
  const int64_t i = r * cols + c;
  if (r == 0 || c == 0 || r == rows - 1 || c == cols - 1) return u[i];
  return u[i] + alpha * (u[i - cols] + u[i + cols] + u[i - 1] + u[i + 1] - T(4) * u[i]);
}

}  // namespace eagle::demo
