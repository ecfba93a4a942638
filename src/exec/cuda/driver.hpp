// Internal, CUDA builds only: the few driver calls the graph builder needs, reached through the
// runtime's entry-point query (no link against libcuda). They copy a stream-captured kernel node,
// whatever runtime launched it, into a graph as a plain kernel node, and patch it later.
#pragma once

#ifdef EAGLE_HAVE_CUDA
#include <cuda.h>
#include <cuda_runtime.h>

namespace eagle::detail {

struct DriverGraphCalls {
  CUresult (*kernel_node_get_params)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS_v2*) = nullptr;
  CUresult (*add_kernel_node)(CUgraphNode*, CUgraph, const CUgraphNode*, size_t,
                              const CUDA_KERNEL_NODE_PARAMS_v2*) = nullptr;
  CUresult (*exec_kernel_node_set_params)(CUgraphExec, CUgraphNode,
                                          const CUDA_KERNEL_NODE_PARAMS_v2*) = nullptr;
  // Launch attributes (thread-block cluster dims, priority...) are not in the params: a copied
  // node takes them from its source with this.
  CUresult (*kernel_node_copy_attributes)(CUgraphNode dst, CUgraphNode src) = nullptr;
  // A kernel's name (CUDA 12.3 on; null where the driver lacks them): traces name the kernels
  // inside child graphs by it.
  CUresult (*func_get_name)(const char**, CUfunction) = nullptr;
  CUresult (*kernel_get_name)(const char**, CUkernel) = nullptr;
};

// Resolved once; throws CudaError when the driver lacks them.
const DriverGraphCalls& driver_graph_calls();

// Throws CudaError naming `what` when `result` is not CUDA_SUCCESS.
void check_driver(CUresult result, const char* what);

}  // namespace eagle::detail
#endif
