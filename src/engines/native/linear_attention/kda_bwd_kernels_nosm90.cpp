// Without a Hopper (sm_90a) build there is no kda / gdn2 backward kernel: the engine declines.
#include "engines/native/linear_attention/kda_bwd_kernels.hpp"

namespace eagle::native::kda {

std::size_t backward_workspace_bytes(const Shape&, int64_t) {
  return 0;
}
bool backward(const BwdArgs&, void*, void*) noexcept {
  return false;
}

}  // namespace eagle::native::kda
