// Float64 host tensors for oracles and the reference math: the reference routines' own data
// form (reference::Dense, contiguous row-major), filled from the suite's random source.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compare.hpp"
#include "eagle/eagle.hpp"
#include "engines/reference/math/dense.hpp"
#include "random.hpp"

namespace eagle::test {

using reference::Dense;
using reference::Dims;

// A tensor of `dims` holding `values` (their count must match).
Dense make_dense(Dims dims, std::vector<double> values);
// Fresh values uniform in [lo, hi), never zero.
Dense random_dense(Dims dims, double lo = -1.0, double hi = 1.0);
// Fresh values of random sign with magnitudes in [min_abs, max_abs): no element is near zero,
// so a dropped term cannot hide behind a small input.
Dense random_dense_signed(Dims dims, double min_abs = 0.1, double max_abs = 1.0);
// The values of an array (any dtype, device) as a Dense of its shape.
Dense to_dense(const Array& a);
// Rows [begin, end) of x along dim 0, as their own tensor.
Dense dense_rows(const Dense& x, int64_t begin, int64_t end);
// Dims equal, then expect_all_near over the values.
void expect_all_near(const Dense& got, const Dense& want, double tol, const std::string& what = "");

}  // namespace eagle::test
