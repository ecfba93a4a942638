// The reference engine's edges: caller buffers (any dtype, any strides) to float64 Dense and
// back, and rounding a value to what its declared dtype can hold.
#pragma once

#include "eagle/plan/operands.hpp"
#include "engines/reference/math/dense.hpp"

namespace eagle::reference {

// Reads a host buffer (CPU memory) element by element through its strides.
Dense gather(const plan::OperandBuffer& b);
// Writes `value` (same element count) into a host buffer through its strides, converting.
void scatter(const Dense& value, const plan::OperandBuffer& b);
// Rounds every element to what `dtype` represents (f16, integers truncate, booleans 0/1).
void round_to(Dense& value, DType dtype);
// The values as integers (ids, offsets, sequence lengths).
std::vector<int64_t> as_integers(const Dense& value);

}  // namespace eagle::reference
