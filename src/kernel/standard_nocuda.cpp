// A build without CUDA: the standard kernels have CPU implementations only.
#include "kernel/standard_impl.hpp"

namespace eagle::detail {

void attach_cuda_elementwise(KernelImpl&, EwOp, DType) {}
void attach_cuda_reduce(KernelImpl&, ReduceOp, DType) {}

}  // namespace eagle::detail

#include "kernel/cells_impl.hpp"

namespace eagle::detail {
CudaFunction cell_cuda_function(CellOp, int) {
  return {};
}
}  // namespace eagle::detail
