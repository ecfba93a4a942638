// Internal: a graph's memset nodes run as kernel nodes. A library's populated or captured graph
// (cuDNN's attention zeroes a workspace with one) may hold memset nodes; measured inside
// issue 12's attention step (H100, session 26 trace), each cost 3.4-3.7 us of idle device time
// between the kernels around it, against 0.5 us between two kernel nodes.
#pragma once

#ifdef EAGLE_HAVE_CUDA
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace eagle::detail {

// The bytes one memset node writes: `height` rows `pitch` bytes apart, each `width` elements
// of `element_bytes` (1, 2 or 4) bytes equal to the low bytes of `value`.
struct MemsetArgs {
  char* dst;
  std::size_t pitch;
  std::size_t width;
  std::size_t height;
  uint32_t value;
  uint32_t element_bytes;
};

// `__global__ void(MemsetArgs)` and the launch shape it needs for `a`.
const void* memset_kernel();
void memset_launch_shape(const MemsetArgs& a, dim3& grid, dim3& block);

// Replaces each memset node of `graph`, and of the child graphs it nests, whose edges are plain
// (no programmatic or port edges) by a kernel node writing the same bytes, with the same
// dependencies and dependents. Deterministic: the same graph rewritten twice gets the same
// topology and node order (what cudaGraphExecChildGraphNodeSetParams asks of an update).
// Returns how many nodes it replaced; throws CudaError when the runtime refuses a step.
int memsets_as_kernels(cudaGraph_t graph);

}  // namespace eagle::detail
#endif
