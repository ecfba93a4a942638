#include "demo_kernels.hpp"
#include "demo_kernels_common.hpp"

namespace eagle::demo {

namespace {

template <class T>
__global__ void heat_kernel(const KernelArgs a) {
  const int64_t rows = a.arrays[0].dims[0], cols = a.arrays[0].dims[1];
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t r = blockIdx.y * static_cast<int64_t>(blockDim.y) + threadIdx.y;
  if (r >= rows || c >= cols) return;
  static_cast<T*>(a.arrays[1].data)[r * cols + c] = heat_point(
      static_cast<const T*>(a.arrays[0].data), rows, cols, r, c, static_cast<T>(a.scalars[0].f));
}

}  // namespace

const void* heat_step_cuda(DType dtype) {
  if (dtype == DType::f32) return reinterpret_cast<const void*>(&heat_kernel<float>);
  if (dtype == DType::f64) return reinterpret_cast<const void*>(&heat_kernel<double>);
  return nullptr;
}

}  // namespace eagle::demo
