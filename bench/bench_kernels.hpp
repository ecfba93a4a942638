// Raw CUDA peers of eagle's kernels: no eagle types, no argument block. CUDA builds only.
// Also the CUDA sides of the benchmark's own eagle kernels (bench_control.cpp), as opaque
// function pointers.
#pragma once

#include <cstdint>
#include <vector>

#include <cuda_runtime.h>

#include "eagle/kernel/kernel.hpp"

namespace eagle::bench {

inline constexpr unsigned kRawBlock = 256;  // eagle's elementwise block size

// out = alpha * x + y over n floats, launched with <<<grid, kRawBlock, 0, stream>>> as a
// grid-stride loop like eagle's axpy. Returns the launch's error (cudaGetLastError).
cudaError_t raw_axpy(float* out, const float* x, const float* y, float alpha, int64_t n,
                     unsigned grid, cudaStream_t stream);

// out[i] = v after `iters` turns of v = fmaf(v, alpha, y[i]) from v = x[i], over n floats;
// <<<grid, kRawBlock, 0, stream>>>, grid-stride. The raw peer of step_kernel (iters 1: an axpy).
cudaError_t raw_step(float* out, const float* x, const float* y, float alpha, int iters, int64_t n,
                     unsigned grid, cudaStream_t stream);

// Kernel nodes added to a graph by hand (cudaGraphAddKernelNode), for the raw conditional-node
// graphs. Each returns the error of the add.
using RawDeps = std::vector<cudaGraphNode_t>;
// raw_axpy as a node (<<<grid, kRawBlock>>>).
cudaError_t add_raw_axpy_node(cudaGraphNode_t* node, cudaGraph_t graph, const RawDeps& deps,
                              float* out, const float* x, const float* y, float alpha, int64_t n,
                              unsigned grid);
// *cell = value, <<<1, 1>>>.
cudaError_t add_raw_fill_u32_node(cudaGraphNode_t* node, cudaGraph_t graph, const RawDeps& deps,
                                  uint32_t* cell, uint32_t value);
// *remaining -= 1; *cell = *remaining > 0, <<<1, 1>>>.
cudaError_t add_raw_countdown_node(cudaGraphNode_t* node, cudaGraph_t graph, const RawDeps& deps,
                                   uint32_t* remaining, uint32_t* cell);
// The countdown that also sets the loop's condition: cudaGraphSetConditional(handle, *cell).
cudaError_t add_raw_countdown_set_node(cudaGraphNode_t* node, cudaGraph_t graph,
                                       const RawDeps& deps, uint32_t* remaining, uint32_t* cell,
                                       cudaGraphConditionalHandle handle);
// The setter eagle puts before a WHILE node and at the end of its body:
// cudaGraphSetConditional(handle, *cell != 0), <<<1, 1>>>.
cudaError_t add_raw_setter_node(cudaGraphNode_t* node, cudaGraph_t graph, const RawDeps& deps,
                                const uint32_t* cell, cudaGraphConditionalHandle handle);

// Fills n elements at `data` with hashed uniform values in [lo, hi) (never exactly zero for
// floats): kind 0 f32, 1 f16, 2 bf16, 3 i32, 4 i64 and 5 u8 (integers floor(value)). Seeded, so a
// run is reproducible; no host round trip for gigabytes of inputs.
cudaError_t raw_fill_uniform(void* data, int kind, int64_t n, double lo, double hi, uint64_t seed,
                             cudaStream_t stream);

// The CUDA functions of the benchmark's eagle kernels.
CudaFunction countdown_cuda_function();  // countdown_kernel
CudaFunction step_cuda_function();       // step_kernel

}  // namespace eagle::bench
