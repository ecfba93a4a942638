// Without a Hopper (sm_90a) build there is no gdn kernel: every query says so and the engine
// declines.
#include "engines/native/linear_attention/gdn_kernels.hpp"

namespace eagle::native::linear_attention {

bool gdn_serves(const GdnShape&) {
  return false;
}
std::size_t gdn_workspace_bytes(const GdnShape&, int64_t) {
  return 0;
}
bool gdn_forward(const GdnArgs&, void*, void*) noexcept {
  return false;
}

}  // namespace eagle::native::linear_attention
