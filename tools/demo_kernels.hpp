// The demo's own kernel, written the way a user writes one: a typed definition whose CPU and CUDA
// versions come from one body (demo_kernels.cu, compiled as C++ when there is no CUDA).
#pragma once

#include "eagle/kernel/kernel.hpp"

namespace eagle::demo {

// One explicit step of the 2-D heat equation on a [rows, cols] grid (f32 or f64):
// out = u + alpha * (laplacian of u) inside, out = u on the boundary.
const Kernel& heat_step();

}  // namespace eagle::demo
