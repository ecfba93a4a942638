// The standard kernels. Elementwise kernels serve f64, f32, f16, bf16, i64, i32 and u32 (u32:
// e.g. filling a device condition cell); reductions serve f64, f32, i64 and i32. On integer dtypes
// the real scalars (fill's value, scale's and axpy's alpha) are converted to the integer type
// first, truncating toward zero: alpha 2.5 scales by 2.
#pragma once

#include "eagle/kernel/kernel.hpp"

namespace eagle::kernels {

const Kernel& fill();   // out = value                  (shape and dtype given by the call)
const Kernel& copy();   // out = x
const Kernel& scale();  // out = alpha * x
const Kernel& axpy();   // out = alpha * x + y
const Kernel& add();    // out = a + b
const Kernel& mul();    // out = a * b
const Kernel& where();  // out = cond ? a : b           (cond is bool or u8)
const Kernel& sum();    // out[0] = sum of x            (a captured CUB call on the GPU)
const Kernel& max();    // out[0] = max of x            (a captured CUB call on the GPU)

// Helpers the derivatives of sum and max record (elementwise dtypes; the one-element inputs have
// x's dtype). Not per-sample: every element reads cell 0.
const Kernel& broadcast();  // out = x[0]              (x holds one element; out's shape by buffer=)
const Kernel& equal_mask();  // out = x == value[0] ? 1 : 0
const Kernel& mul_div();     // out = x * num[0] / den[0] (integers: 0 where den[0] == 0)

}  // namespace eagle::kernels
