// Kernels defined the way a user defines them, for the tests.
#pragma once

#include "eagle/kernel/kernel.hpp"

namespace eagle::test {

// counter[0] += 1 on a u32[1] array (read-write): counts launches. CPU and CUDA.
const Kernel& count_kernel();
// out = x * x for f32, with a CPU implementation only.
const Kernel& cpu_only_square();

// The CUDA side of count_kernel (testing_kernels_cuda.cu); nullptr in a build without CUDA.
const void* count_cuda_function();

}  // namespace eagle::test
