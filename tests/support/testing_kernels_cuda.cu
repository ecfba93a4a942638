#include "testing_kernels.hpp"

namespace eagle::test {

namespace {
__global__ void count_cuda(const KernelArgs a) {
  ++*static_cast<uint32_t*>(a.arrays[0].data);
}
__global__ void greater_cuda(const KernelArgs a) {
  *static_cast<uint32_t*>(a.arrays[1].data) =
      *static_cast<const double*>(a.arrays[0].data) > a.scalars[0].f ? 1u : 0u;
}

__global__ void countdown_cuda(const KernelArgs a) {
  uint32_t* remaining = static_cast<uint32_t*>(a.arrays[0].data);
  *remaining -= 1;
  *static_cast<uint32_t*>(a.arrays[1].data) = *remaining > 0 ? 1u : 0u;
}

}  // namespace

const void* greater_cuda_function() {
  return reinterpret_cast<const void*>(&greater_cuda);
}
const void* countdown_cuda_function() {
  return reinterpret_cast<const void*>(&countdown_cuda);
}
const void* count_cuda_function() {
  return reinterpret_cast<const void*>(&count_cuda);
}

}  // namespace eagle::test
