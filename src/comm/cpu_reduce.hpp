// Internal: the CPU group's element loops. Deterministic: inputs are combined in the order
// given (rank 0 first), in f32 for 16-bit floats, f64 for f64, and the dtype itself (wrapping)
// for integers.
#pragma once

#include <cstdint>

#include "eagle/comm/collectives.hpp"
#include "eagle/core/dtype.hpp"

namespace eagle::comm::detail {

// For i in [0, count): v = inputs[0][i] op inputs[1][i] op ... (k inputs, in order), divided by
// k for avg, then written to outputs[0..n_out)[i]. Every input element is read before any output
// element i is written, so an output may be one of the inputs (in place).
void reduce_into(DType dtype, ReduceOp op, const void* const* inputs, int k, void* const* outputs,
                 int n_out, int64_t count);

// Whether the CPU group (and NCCL) serve `dtype`, and `op` on it.
bool collective_dtype(DType dtype);
bool reduce_op_serves(ReduceOp op, DType dtype);

}  // namespace eagle::comm::detail
