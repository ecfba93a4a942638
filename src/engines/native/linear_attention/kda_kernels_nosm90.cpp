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
std::size_t recompute_bytes(const Shape&, int64_t) {
  return 0;
}
bool recompute(const FwdArgs&, void*, void*, ChunkViews*) noexcept {
  return false;
}

}  // namespace eagle::native::kda
