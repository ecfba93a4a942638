// Without a Hopper (sm_90a) build there is no kda / gdn2 kernel: every query says so and the
// engine declines.
#include "engines/native/linear_attention/kda_kernels.hpp"

namespace eagle::native::kda {

bool served(const Shape&) {
  return false;
}
std::size_t workspace_bytes(const Shape&, int64_t) {
  return 0;
}
bool forward(const FwdArgs&, void*, void*) noexcept {
  return false;
}

}  // namespace eagle::native::kda
