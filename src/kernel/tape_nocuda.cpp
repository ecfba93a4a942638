// A build without CUDA: the tape kernels have CPU implementations only.
#include "kernel/tape_impl.hpp"

namespace eagle::detail {

CudaFunction tape_cuda_function(bool, std::size_t) {
  return {};
}
CudaLaunchShape tape_cuda_shape(const KernelArgs&, const DeviceProperties&) {
  return {};
}

}  // namespace eagle::detail
