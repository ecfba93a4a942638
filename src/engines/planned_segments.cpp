// planned_segments: an operation graph as planned kernels of segments one engine family serves.
#include "eagle/engines/planned_kernel.hpp"
#include "engines/planned_kernel_of.hpp"

namespace eagle::engines {

std::vector<PlannedSegment> planned_segments(const op::Graph& graph, const PlanningOptions& options,
                                             const plan::Manifest& manifest) {
  graph.validate();
  if (graph.nodes().empty()) return {};
  return detail::planned_kernels_of(detail::segments(graph, options.fuse_epilogues), options,
                                    manifest);
}

std::vector<PlannedSegment> planned_segments(const op::Graph& graph,
                                             const std::vector<plan::HeurMode>& modes,
                                             const plan::Manifest& manifest) {
  return planned_segments(graph, PlanningOptions{modes, std::nullopt, false}, manifest);
}

}  // namespace eagle::engines
