// Kernels between a strided view (a transpose, a column slice: Value::transpose, slice(dim, ...))
// and a contiguous array of the view's shape, element i meaning the view's i-th element in
// row-major order. Reverse mode forms the cotangents of strided views with them.
#pragma once

#include "eagle/kernel/kernel.hpp"

namespace eagle::kernels {

// x (a strided view, read) -> out (contiguous, x's shape and dtype): out[i] = x[i]. Any float
// dtype (f32, f64, f16, bf16).
const Kernel& gather_view();
// view (a strided view, read-write), c (contiguous, the view's shape and dtype): view[i] += c[i].
// f32 and f64 (16-bit sums: gather_view, add, scatter_view).
const Kernel& add_to_view();
// view (a strided view, written), c (contiguous, the view's shape and dtype): view[i] = c[i].
// Any float dtype.
const Kernel& scatter_view();
// view (a strided view, read-write): view[i] = 0. Any float dtype.
const Kernel& zero_view();

}  // namespace eagle::kernels
