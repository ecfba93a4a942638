// GEMM operands for the GEMM engines' tests: fresh random values over logical dims, and for a
// transposed layout the column-major store the engine reads through strides.
#pragma once

#include <cstdint>
#include <vector>

#include "eagle/op/graph.hpp"

namespace eagle::test {

op::Dims concat(op::Dims a, const op::Dims& b);
op::Dims row_major(const op::Dims& d);  // the dense row-major strides of d

// One operand: its logical values (row-major over `dims`) and, for a transposed layout, the
// strides of a column-major store and that store's contents.
struct GemmOperand {
  op::Dims dims, strides;  // strides: as the engine's graph declares them
  std::vector<double> logical, stored;
};
// [batch..., rows, cols] of fresh values in [-1, 1]; col_major: stored as [batch..., cols, rows].
GemmOperand make_operand(const op::Dims& batch, int64_t rows, int64_t cols, bool col_major);

}  // namespace eagle::test
