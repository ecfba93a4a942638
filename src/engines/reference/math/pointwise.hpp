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

// Exact integer semantics of the ops that accept integers, computed in int64 with
// two's-complement wrapping on overflow (like torch): add, sub, mul, neg, abs, square wrap
// (abs(INT64_MIN) = INT64_MIN); div truncates toward zero and mod takes the sign of a (C++ / and
// %, the integer forms of the float ops' a / b and fmod), INT64_MIN / -1 wraps to INT64_MIN and
// INT64_MIN mod -1 is 0; a division or mod by zero has no value (the map throws). max, min,
// comparisons and logic are exact. The result is narrowed to its dtype afterwards by wrapping
// (round_to). nullptr for an op without an integer form (the floating-only ops).
using IntUnaryFn = int64_t (*)(int64_t);
using IntBinaryFn = bool (*)(int64_t a, int64_t b, int64_t* out);  // false: no value
IntUnaryFn int_unary_fn(std::string_view op);
IntBinaryFn int_binary_fn(std::string_view op);

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
// The integer forms over integer tensors (x.integer, a.integer, b.integer), giving an integer
// tensor. map_binary_int throws InvalidArgument naming `op`, the element and both values where f
// has no value (an integer division or mod by zero).
Dense map_unary_int(IntUnaryFn f, const Dense& x);
Dense map_binary_int(std::string_view op, IntBinaryFn f, const Dense& a, const Dense& b);
// y = cond != 0 ? a : b, the three broadcast together; exact (an integer tensor) when a and b are
// both integer tensors.
Dense where(const Dense& cond, const Dense& a, const Dense& b);

}  // namespace eagle::reference
