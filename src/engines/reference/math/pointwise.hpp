// Reference semantics of the pointwise operations: the scalar function behind every unary and
// binary op name, numpy broadcasting, and the element-wise maps over Dense tensors.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "engines/reference/math/dense.hpp"

namespace eagle::reference {

using UnaryFn = double (*)(double);
using BinaryFn = double (*)(double, double);

// The scalar function of an op name; nullptr for an unknown name. NaN propagates through every
// arithmetic op (max, min, relu included; pow keeps C's pow(1, NaN) = pow(NaN, 0) = 1).
// Comparisons and logical ops return 1.0 or 0.0; a logical op treats any nonzero value (NaN
// included) as true.
UnaryFn unary_fn(std::string_view op);
BinaryFn binary_fn(std::string_view op);

// Every name unary_fn / binary_fn knows, in table order.
const std::vector<std::string_view>& unary_op_names();
const std::vector<std::string_view>& binary_op_names();

// "[2,3]": how dims appear in error messages.
std::string format_dims(const Dims& dims);

// The numpy broadcast of two dims (aligned right; a size 1 stretches). InvalidArgument names both
// dims when a pair of sizes differs and neither is 1.
Dims broadcast_dims(const Dims& a, const Dims& b);

// For each element of a tensor of dims `to`, the flat index of the element of a tensor of dims
// `from` that broadcasts onto it. InvalidArgument if `from` does not broadcast to `to`.
std::vector<int64_t> broadcast_index(const Dims& from, const Dims& to);

// y[i] = f(x[i]), same dims as x.
Dense map_unary(UnaryFn f, const Dense& x);
// y = f(a, b) over broadcast_dims(a.dims, b.dims).
Dense map_binary(BinaryFn f, const Dense& a, const Dense& b);
// y = cond != 0 ? a : b, the three broadcast together.
Dense where(const Dense& cond, const Dense& a, const Dense& b);

}  // namespace eagle::reference
