// Internal: the arithmetic of the cell kernels, shared by the CPU and CUDA implementations.
#pragma once

#include <cstdint>

#include "eagle/kernel/args.hpp"
#include "eagle/kernel/cells.hpp"
#include "eagle/kernel/kernel.hpp"

#ifdef __CUDACC__
#define EAGLE_CELL_HD __host__ __device__ __forceinline__
#else
#define EAGLE_CELL_HD inline
#endif

namespace eagle::detail {

enum class CellOp : int { any, none, loop_next, first_true, increment, mad };

template <CellOp op, class Args>
EAGLE_CELL_HD void cell_apply(const Args& a) {
  auto cell = [&a](int i) -> uint32_t& { return *static_cast<uint32_t*>(a.arrays[i].data); };
  if constexpr (op == CellOp::any) {
    cell(2) = (cell(0) != 0 || cell(1) != 0) ? 1u : 0u;
  } else if constexpr (op == CellOp::none) {
    cell(2) = (cell(0) == 0 && cell(1) == 0) ? 1u : 0u;
  } else if constexpr (op == CellOp::loop_next) {
    if (cell(0) > 0) cell(0) -= 1;
    cell(2) = (cell(0) > 0 && cell(1) == 0) ? 1u : 0u;
  } else if constexpr (op == CellOp::increment) {
    cell(1) = cell(0) + 1u;
  } else if constexpr (op == CellOp::mad) {
    cell(3) = cell(0) * cell(1) + cell(2);
  } else {  // first_true: conds are arrays 0..n-1, the index is the last array
    const int n = a.num_arrays - 1;
    uint32_t index = static_cast<uint32_t>(n);
    for (int k = n - 1; k >= 0; --k)
      if (cell(k) != 0) index = static_cast<uint32_t>(k);
    cell(n) = index;
  }
}

// The CUDA kernel of `op` taking `arrays` arrays (cells_cuda.cu); empty without CUDA.
CudaFunction cell_cuda_function(CellOp op, int arrays);

}  // namespace eagle::detail
