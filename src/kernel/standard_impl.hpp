// Internal: how the standard kernels find their CPU and CUDA implementations.
#pragma once

#include "eagle/core/dtype.hpp"
#include "eagle/kernel/kernel.hpp"
#include "kernel/elementwise_ops.hpp"

namespace eagle::detail {

enum class ReduceOp : int { sum, max };

// CPU implementations (standard_cpu.cpp). Return nullptr for a dtype they do not serve.
CpuFn cpu_elementwise(EwOp op, DType dtype);
CpuFn cpu_reduce(ReduceOp op, DType dtype);

// Fill in the CUDA side of `impl` (standard_cuda.cu); a build without CUDA leaves it empty.
void attach_cuda_elementwise(KernelImpl& impl, EwOp op, DType dtype);
void attach_cuda_reduce(KernelImpl& impl, ReduceOp op, DType dtype);

}  // namespace eagle::detail
