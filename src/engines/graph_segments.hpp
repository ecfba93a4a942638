// Internal: an op::Graph cut into segments an engine family serves on its own, so that a graph
// mixing families (the backward of an operation: matmuls, reductions, pointwise formulas, the
// _bwd ops) is planned piece by piece on any device: each run of consecutive pointwise nodes of
// one output dims is one segment (the fused pointwise engine serves it in one launch; a run is
// cut at its limits, 32 nodes and 8 inputs), every other node a segment of its own, but for a
// matmul's epilogue: the chain of pointwise nodes right after a matmul, each reading the
// previous result (up to 4), joins the matmul's segment, which then outputs the matmul's result
// too (the epilogue's derivative reads it; recomputing it would repeat the GEMM).
#pragma once

#include <cstdint>
#include <vector>

#include "eagle/op/graph.hpp"

namespace eagle::engines::detail {

struct Segment {
  op::Graph graph;  // unplanned
  // Per input and per output operand of `graph`, each in ascending uid order (as planned_kernel
  // orders its parameters): the uid of the tensor of the whole graph it stands for.
  std::vector<int64_t> inputs, outputs;
  bool epilogue = false;  // a matmul with its epilogue
};

// The segments of `whole` in an order that respects its data flow. A segment's outputs are the
// tensors of its nodes that `whole` outputs or that another segment reads.
// fuse_epilogues=false: every matmul alone (the pieces of an epilogue segment).
// keep_products=false: an epilogue segment outputs the matmul's result only where `whole`
// outputs it or another segment reads it (a backward graph, which is not differentiated).
std::vector<Segment> segments(const op::Graph& whole, bool fuse_epilogues = true,
                              bool keep_products = true);

}  // namespace eagle::engines::detail
