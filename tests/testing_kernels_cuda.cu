#include "testing_kernels.hpp"

namespace eagle::test {

namespace {
__global__ void count_cuda(const KernelArgs a) {
  ++*static_cast<uint32_t*>(a.arrays[0].data);
}
}  // namespace

const void* count_cuda_function() {
  return reinterpret_cast<const void*>(&count_cuda);
}

}  // namespace eagle::test
