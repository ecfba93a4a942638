// planned_segments: an operation graph as planned kernels of segments one engine family serves.
#include "eagle/engines/planned_kernel.hpp"
#include "engines/graph_segments.hpp"
#include "engines/planned_kernel_of.hpp"

namespace eagle::engines {

std::vector<PlannedSegment> planned_segments(const op::Graph& graph, const PlanningOptions& options,
                                             const plan::Manifest& manifest) {
  graph.validate();
  std::vector<PlannedSegment> out;
  if (graph.nodes().empty()) return out;
  for (detail::Segment& s : detail::segments(graph, options.fuse_epilogues))
    out.push_back({detail::planned_kernel_of(s.graph, options, manifest, s.epilogue),
                   std::move(s.inputs), std::move(s.outputs)});
  return out;
}

std::vector<PlannedSegment> planned_segments(const op::Graph& graph,
                                             const std::vector<plan::HeurMode>& modes,
                                             const plan::Manifest& manifest) {
  return planned_segments(graph, PlanningOptions{modes, std::nullopt, false}, manifest);
}

}  // namespace eagle::engines
