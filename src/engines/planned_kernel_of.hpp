// Internal: engines::planned_kernel with one more choice, for planned_segments: a graph that no
// engine serves whole on a device (a matmul with its pointwise epilogue where no engine fuses
// them: no cuDNN, an f32 matmul) may be planned as its unfused segments, run in order as one
// call, instead of failing to build.
#pragma once

#include <vector>

#include "eagle/engines/planned_kernel.hpp"
#include "engines/graph_segments.hpp"

namespace eagle::engines::detail {

Kernel planned_kernel_of(const op::Graph& graph, const PlanningOptions& options,
                         const plan::Manifest& manifest, bool split_when_unserved);

// Each segment as a planned kernel (an epilogue segment with the fallback above), with the uids
// it reads and writes: planned_segments' pieces, and a planned derivative's.
std::vector<PlannedSegment> planned_kernels_of(std::vector<Segment> segments,
                                               const PlanningOptions& options,
                                               const plan::Manifest& manifest);

}  // namespace eagle::engines::detail
