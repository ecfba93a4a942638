// Internal: the nodes of a CUDA graph (not of the graphs it nests), in the order they were added.
#pragma once

#ifdef EAGLE_HAVE_CUDA
#include <cuda_runtime.h>

#include <vector>

#include "util/cuda_check.hpp"

namespace eagle::detail {

inline std::vector<cudaGraphNode_t> graph_nodes(cudaGraph_t graph) {
  std::size_t count = 0;
  EAGLE_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &count));
  std::vector<cudaGraphNode_t> nodes(count);
  EAGLE_CUDA_CHECK(cudaGraphGetNodes(graph, nodes.data(), &count));
  nodes.resize(count);
  return nodes;
}

}  // namespace eagle::detail
#endif
