// The reference engine's edges: caller buffers (any dtype, any strides) to float64 Dense and
// back, and rounding a value to what its declared dtype can hold.
#pragma once

#include "eagle/plan/operands.hpp"
#include "engines/reference/math/dense.hpp"

namespace eagle::reference {

// Reads a host buffer (CPU memory) element by element through its strides. Integer and boolean
// buffers give an integer Dense (exact values).
Dense gather(const plan::OperandBuffer& b);
// Writes `value` (same element count) into a host buffer through its strides, converting as
// round_to does.
void scatter(const Dense& value, const plan::OperandBuffer& b);
// Rounds every element to what `dtype` represents: a floating dtype rounds (f16: to the nearest
// f16); an integer dtype wraps exact integers to its width (two's complement) and converts reals
// with saturating_cast (truncated, clamped to the range, NaN -> 0); boolean is v != 0 (NaN is
// true). An integer dtype leaves an integer Dense, a floating one a real Dense.
void round_to(Dense& value, DType dtype);
// The values as integers (ids, offsets, sequence lengths): exact for an integer Dense, by
// saturating_cast for a real one.
std::vector<int64_t> as_integers(const Dense& value);

}  // namespace eagle::reference
