// Without a Hopper (sm_90a) build there is no gdn backward kernel: the engine declines.
#include "engines/native/linear_attention/gdn_bwd_kernels.hpp"

namespace eagle::native::kda {

std::size_t gdn_backward_workspace_bytes(const Shape&, int64_t) {
  return 0;
}
bool gdn_backward(const GdnBwdArgs&, void*, void*) noexcept {
  return false;
}

}  // namespace eagle::native::kda
