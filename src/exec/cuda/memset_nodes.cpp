// Memset nodes rewritten as kernel nodes (exec/cuda/memset_nodes.hpp).
#ifdef EAGLE_HAVE_CUDA
#include "exec/cuda/memset_nodes.hpp"

#include <algorithm>
#include <vector>

#include "exec/cuda/graph_nodes.hpp"
#include "util/cuda_check.hpp"

namespace eagle::detail {

namespace {

// A node's neighbours on one side, with their edges' data.
struct Edges {
  std::vector<cudaGraphNode_t> nodes;
  std::vector<cudaGraphEdgeData> data;
  bool plain() const {
    return std::all_of(data.begin(), data.end(), [](const cudaGraphEdgeData& e) {
      return e.type == cudaGraphDependencyTypeDefault && e.from_port == 0 && e.to_port == 0;
    });
  }
};

// cudaGraphNodeGetDependencies or cudaGraphNodeGetDependentNodes (one signature).
using EdgeQuery = cudaError_t (*)(cudaGraphNode_t, cudaGraphNode_t*, cudaGraphEdgeData*,
                                  std::size_t*);

Edges edges(cudaGraphNode_t node, EdgeQuery query) {
  Edges e;
  std::size_t n = 0;
  EAGLE_CUDA_CHECK(query(node, nullptr, nullptr, &n));
  e.nodes.resize(n);
  e.data.resize(n);
  EAGLE_CUDA_CHECK(query(node, e.nodes.data(), e.data.data(), &n));
  return e;
}

bool replace(cudaGraph_t graph, cudaGraphNode_t memset) {
  const Edges before = edges(memset, &cudaGraphNodeGetDependencies);
  const Edges after = edges(memset, &cudaGraphNodeGetDependentNodes);
  if (!before.plain() || !after.plain()) return false;
  cudaMemsetParams m{};
  EAGLE_CUDA_CHECK(cudaGraphMemsetNodeGetParams(memset, &m));
  if (m.elementSize != 1 && m.elementSize != 2 && m.elementSize != 4) return false;
  MemsetArgs args{static_cast<char*>(m.dst),
                  m.height > 1 ? m.pitch : 0,
                  m.width,
                  m.height,
                  m.value,
                  m.elementSize};
  void* params[] = {&args};
  cudaKernelNodeParams p{};
  p.func = const_cast<void*>(memset_kernel());
  memset_launch_shape(args, p.gridDim, p.blockDim);
  p.kernelParams = params;  // copied when the node is added
  cudaGraphNode_t kernel = nullptr;
  EAGLE_CUDA_CHECK(
      cudaGraphAddKernelNode(&kernel, graph, before.nodes.data(), before.nodes.size(), &p));
  const std::vector<cudaGraphNode_t> from(after.nodes.size(), kernel);
  if (!after.nodes.empty())
    EAGLE_CUDA_CHECK(cudaGraphAddDependencies(graph, from.data(), after.nodes.data(), nullptr,
                                              after.nodes.size()));
  EAGLE_CUDA_CHECK(cudaGraphDestroyNode(memset));
  return true;
}

}  // namespace

int memsets_as_kernels(cudaGraph_t graph) {
  int replaced = 0;
  for (cudaGraphNode_t node : graph_nodes(graph)) {
    cudaGraphNodeType type = cudaGraphNodeTypeEmpty;
    EAGLE_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
    if (type == cudaGraphNodeTypeGraph) {
      cudaGraph_t inner = nullptr;  // the embedded graph itself, not a copy
      EAGLE_CUDA_CHECK(cudaGraphChildGraphNodeGetGraph(node, &inner));
      replaced += memsets_as_kernels(inner);
    } else if (type == cudaGraphNodeTypeMemset && replace(graph, node)) {
      ++replaced;
    }
  }
  return replaced;
}

}  // namespace eagle::detail
#endif
