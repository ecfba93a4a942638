// Internal: the derivative rule of the ragged row kernels (mask_rows, gradient_barrier). Defined
// in C++ (row_derivative.cpp), so the kernels' source, compiled as CUDA, needs none of the
// recording headers. The ragged layer lies above graph, so the kernels carry their rule
// themselves (KernelDef::derivative) rather than through graph's table of standard rules.
#pragma once

#include <memory>

#include "eagle/kernel/kernel.hpp"

namespace eagle::ragged::detail {

// (x, cu_seqlens, y) -> dx = mask_rows(dy, cu_seqlens): the cotangent's active rows, exactly 0
// in the padding rows (whatever dy holds there, NaN included); cu_seqlens gets none. It reads
// cu_seqlens, so a forward recorded with record=true saves it before an overwrite.
std::shared_ptr<const Derivative> masked_cotangent_rule();

}  // namespace eagle::ragged::detail
