// A build without CUDA: the test kernels have CPU implementations only.
#include "testing_kernels.hpp"

namespace eagle::test {

CudaFunction count_cuda_function() {
  return {};
}
CudaFunction greater_cuda_function() {
  return {};
}
CudaFunction countdown_cuda_function() {
  return {};
}

}  // namespace eagle::test
