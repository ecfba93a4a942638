// A build without CUDA: the test kernels have CPU implementations only.
#include "testing_kernels.hpp"

namespace eagle::test {

const void* count_cuda_function() {
  return nullptr;
}
const void* greater_cuda_function() {
  return nullptr;
}
const void* countdown_cuda_function() {
  return nullptr;
}

}  // namespace eagle::test
