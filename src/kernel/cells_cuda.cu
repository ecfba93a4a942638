#include <utility>

#include "eagle/kernel/cuda_function.hpp"
#include "kernel/cells_impl.hpp"

namespace eagle::detail {

namespace {

template <CellOp op, int A>
__global__ void cell_kernel(const KernelArgsN<A, 0> a) {
  cell_apply<op>(a);
}

// first_true over 1..kMaxFirstTrue conditions: one kernel per arity (1 + conditions arrays).
template <std::size_t... I>
CudaFunction first_true_of(int arrays, std::index_sequence<I...>) {
  const CudaFunction table[] = {
      cuda_function(&cell_kernel<CellOp::first_true, static_cast<int>(I) + 2>)...};
  const int index = arrays - 2;
  return index >= 0 && index < static_cast<int>(sizeof...(I)) ? table[index] : CudaFunction{};
}

}  // namespace

CudaFunction cell_cuda_function(CellOp op, int arrays) {
  switch (op) {
    case CellOp::any:
      return cuda_function(&cell_kernel<CellOp::any, 3>);
    case CellOp::none:
      return cuda_function(&cell_kernel<CellOp::none, 3>);
    case CellOp::loop_next:
      return cuda_function(&cell_kernel<CellOp::loop_next, 3>);
    case CellOp::increment:
      return cuda_function(&cell_kernel<CellOp::increment, 2>);
    case CellOp::mad:
      return cuda_function(&cell_kernel<CellOp::mad, 4>);
    case CellOp::first_true:
      return first_true_of(arrays, std::make_index_sequence<kernels::kMaxFirstTrue>());
  }
  return {};
}

}  // namespace eagle::detail
