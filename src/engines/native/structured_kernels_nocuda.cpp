// A build without CUDA: no structured kernels; the native engines decline every graph.
#include "engines/native/embedding_bwd_kernels.hpp"
#include "engines/native/embedding_kernels.hpp"
#include "engines/native/fused_kernels.hpp"
#include "engines/native/launch_status.hpp"
#include "engines/native/loss_kernels.hpp"
#include "engines/native/norm_bwd_kernels.hpp"
#include "engines/native/norm_kernels.hpp"
#include "engines/native/reduction_kernels.hpp"
#include "engines/native/softmax_kernels.hpp"

namespace eagle::native {

bool launch_succeeded() noexcept {
  return false;
}
const char* structured_launch_error() noexcept {
  return "this build of eagle has no CUDA";
}
SoftmaxLauncher softmax_launcher(DType, const RowGeometry&) {
  return nullptr;
}
SoftmaxLauncher split_softmax_launcher(DType, const RowGeometry&) {
  return nullptr;
}
NormLauncher norm_launcher(DType, const RowGeometry&) {
  return nullptr;
}
CrossEntropyLauncher cross_entropy_launcher(DType, DType, const RowGeometry&) {
  return nullptr;
}
CrossEntropyLauncher split_cross_entropy_launcher(DType, DType, const RowGeometry&) {
  return nullptr;
}
bool launch_loss_total(const float*, const void*, DType, int64_t, int64_t, bool, float*,
                       void*) noexcept {
  return false;
}
bool launch_count_not_equal(const void*, DType, int64_t, int64_t, void*, DType, void*) noexcept {
  return false;
}
EmbeddingLauncher embedding_launcher(int, DType) {
  return nullptr;
}
RowReduceLauncher row_reduce_launcher(DType, const RowGeometry&) {
  return nullptr;
}
ColumnReduceLauncher column_reduce_launcher(DType, int) {
  return nullptr;
}
StridedReduceLauncher strided_reduce_launcher(DType) {
  return nullptr;
}
SoftmaxBwdLauncher softmax_bwd_launcher(DType, const RowGeometry&) {
  return nullptr;
}
SoftmaxBwdLauncher split_softmax_bwd_launcher(DType, const RowGeometry&) {
  return nullptr;
}
NormBwdLauncher norm_bwd_launcher(DType, const RowGeometry&, bool) {
  return nullptr;
}
CrossEntropyBwdLauncher cross_entropy_bwd_launcher(DType, DType, const RowGeometry&) {
  return nullptr;
}
EmbeddingBwdLauncher embedding_bwd_launcher(DType, DType, const RowGeometry&) {
  return nullptr;
}
FusedLauncher fused_launcher() {
  return nullptr;
}

}  // namespace eagle::native
