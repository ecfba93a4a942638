// The demo's own kernel, defined the way a user defines one: a value with a CPU and a CUDA
// implementation computing the same function.
#pragma once

#include "eagle/kernel/kernel.hpp"

namespace eagle::demo {

// One explicit step of the 2-D heat equation on a [rows, cols] grid (f32 or f64):
// out = u + alpha * (laplacian of u) inside, out = u on the boundary.
const Kernel& heat_step();

// CUDA side (demo_kernels.cu); nullptr in a build without CUDA.
const void* heat_step_cuda(DType dtype);

}  // namespace eagle::demo
