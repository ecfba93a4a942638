// Kernels written in the typed form (eagle/kernel/typed.hpp), for the tests. typed_kernels.cu
// is compiled as CUDA in a CUDA build and as C++ otherwise.
#pragma once

#include "eagle/kernel/kernel.hpp"

namespace eagle::test {

// out = alpha * x + y (f32, f64).
const Kernel& typed_axpy();
// out = sum over k of (k + 1) * a_k for eleven inputs a0..a10, plus alpha * beta + shift
// (f32, f64): twelve arrays and three scalars, past every old limit.
const Kernel& typed_weighted_sum11();
// out = x + shift, integers (i64, i32); shift is an integer scalar.
const Kernel& typed_shift();
// out[i] = x.at(i / cols, i % cols): reads a 2-D strided view into a dense output (f32).
const Kernel& typed_strided_copy();
// x *= alpha in place through a 2-D strided view (f32): a strided read-write parameter.
const Kernel& typed_strided_scale();
// remaining -= 1 (u32[1], read-write); going = remaining > 0: a read-write accessor.
const Kernel& typed_countdown();
// out = 2 x with a CUDA body only (f32): no CPU implementation.
const Kernel& typed_cuda_only();
// out = 3 x with a CPU body only (f32): no CUDA implementation.
const Kernel& typed_cpu_only();

}  // namespace eagle::test
