// A build without CUDA: no kernels; the native engine declines every graph.
#include "engines/native/pointwise_kernels.hpp"

namespace eagle::native {

const void* pointwise_kernel(PwOp, DType, bool) {
  return nullptr;
}
bool launch_pointwise(const void*, const void*, const void*, void*, int64_t, unsigned, unsigned,
                      void*) noexcept {
  return false;
}
const char* last_launch_error() noexcept {
  return "this build of eagle has no CUDA";
}

}  // namespace eagle::native
