// Without a Hopper (sm_90a) build there is no varlen attention kernel: every query says so and
// the engine declines.
#include "engines/native/attention/varlen_kernels.hpp"

namespace eagle::native::attention {

int fwd_block_rows(const VarlenShape&) {
  return 0;
}
bool varlen_fwd(const FwdArgs&, void*) noexcept {
  return false;
}
int bwd_kv_block_rows(const VarlenShape&) {
  return 0;
}
int bwd_q_block_rows(const VarlenShape&) {
  return 0;
}
std::size_t bwd_workspace_bytes(const VarlenShape&, bool) {
  return 0;
}
bool varlen_bwd(const BwdArgs&, void*, void*) noexcept {
  return false;
}
bool tile_offsets_launch(const TileOffsetsJob*, int, int64_t, void*) noexcept {
  return false;
}

}  // namespace eagle::native::attention
