#include "eagle/kernel/cuda_function.hpp"
#include "testing_kernels.hpp"

namespace eagle::test {

namespace {
__global__ void count_cuda(const KernelArgsN<1, 0> a) {
  ++*static_cast<uint32_t*>(a.arrays[0].data);
}
__global__ void greater_cuda(const KernelArgsN<2, 1> a) {
  *static_cast<uint32_t*>(a.arrays[1].data) =
      *static_cast<const double*>(a.arrays[0].data) > a.scalars[0].f ? 1u : 0u;
}

__global__ void countdown_cuda(const KernelArgsN<2, 0> a) {
  uint32_t* remaining = static_cast<uint32_t*>(a.arrays[0].data);
  *remaining -= 1;
  *static_cast<uint32_t*>(a.arrays[1].data) = *remaining > 0 ? 1u : 0u;
}

}  // namespace

CudaFunction greater_cuda_function() {
  return cuda_function(&greater_cuda);
}
CudaFunction countdown_cuda_function() {
  return cuda_function(&countdown_cuda);
}
CudaFunction count_cuda_function() {
  return cuda_function(&count_cuda);
}

}  // namespace eagle::test
