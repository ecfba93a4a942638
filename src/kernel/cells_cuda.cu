#include "kernel/cells_impl.hpp"

namespace eagle::detail {

namespace {
template <CellOp op>
__global__ void cell_kernel(const KernelArgs a) {
  cell_apply<op>(a);
}
}  // namespace

const void* cell_cuda_function(CellOp op) {
  switch (op) {
    case CellOp::any:
      return reinterpret_cast<const void*>(&cell_kernel<CellOp::any>);
    case CellOp::none:
      return reinterpret_cast<const void*>(&cell_kernel<CellOp::none>);
    case CellOp::loop_next:
      return reinterpret_cast<const void*>(&cell_kernel<CellOp::loop_next>);
    case CellOp::first_true:
      return reinterpret_cast<const void*>(&cell_kernel<CellOp::first_true>);
  }
  return nullptr;
}

}  // namespace eagle::detail
