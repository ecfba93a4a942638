// Kernels defined the way a user defines them, for the tests.
#pragma once

#include "eagle/kernel/kernel.hpp"

namespace eagle::test {

// counter[0] += 1 on a u32[1] array (read-write): counts launches. CPU and CUDA.
const Kernel& count_kernel();
// out = x * x for f32, with a CPU implementation only.
const Kernel& cpu_only_square();

// cell = x[0] > threshold ? 1 : 0, for f64 x[1] and a u32[1] cell. CPU and CUDA.
const Kernel& greater_kernel();
// remaining -= 1 (u32[1], read-write); cell = remaining > 0 (u32[1], write). CPU and CUDA.
const Kernel& countdown_kernel();

// out[i] = x[n - 1 - i] for f32: not per-sample. CPU only.
const Kernel& reverse_kernel();

// The CUDA sides (testing_kernels_cuda.cu); nullptr in a build without CUDA.
CudaFunction count_cuda_function();
CudaFunction greater_cuda_function();
CudaFunction countdown_cuda_function();

}  // namespace eagle::test
