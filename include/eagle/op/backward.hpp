// The backward of an operation graph as more operation graphs, built from the derivative rule
// each op's table entry carries (OpSchema::grad): planned over the same engines as any graph.
//
// The backward graph reads the forward's operands (its inputs, and the outputs it exposes), one
// cotangent per differentiated output, and whatever forward intermediates the rules need that
// the forward keeps to itself (virtual tensors, statistics it does not output): those come from
// a second graph, `recompute`, which runs the forward's nodes again over the forward's operands
// (norms with their statistics, sdpa with its logsumexp) and outputs them. A matmul's gradients
// read a transposed operand as a strided view (the op IR has no transpose): that operand must be
// an operand of the backward graph, which is why intermediates are recomputed in a graph of
// their own rather than inside the backward graph.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "eagle/op/graph.hpp"

namespace eagle::op {

// Where an input of a derived graph (recompute or backward) gets its contents.
struct Source {
  enum class Kind : uint8_t {
    forward,     // the forward operand with `uid` (an input, or an output after the forward ran)
    recomputed,  // the output with `uid` of the recompute graph
    cotangent,   // the cotangent of the forward output with `uid`
    constant,    // `value`: rank 0, or the input's dims as a stride-0 broadcast of one element
  };
  Kind kind = Kind::forward;
  int64_t uid = 0;
  double value = 0;
  // The source's last two dims swapped: a strided view of it (matmul's transposed operands).
  // Otherwise the input's dims may still differ from the source's with the same element count
  // (a reduction's cotangent read in keepdim dims): the source is read reshaped.
  bool transposed = false;
};

struct BackwardGraph {
  // Forward intermediates the backward reads, computed again from the forward's operands; it
  // has no nodes when nothing is recomputed (then do not plan it). Its outputs are read by
  // `graph` through Source::Kind::recomputed.
  Graph recompute{"recompute"};
  std::vector<std::pair<Tensor, Source>> recompute_inputs;  // every input: Kind::forward
  // The vector-Jacobian product. It has no nodes when no gradient flows (every gradient zero).
  Graph graph{"backward"};
  std::vector<std::pair<Tensor, Source>> inputs;  // every input of `graph` (ragged offsets too)
  // Per wrt entry, in order: its gradient (an output of `graph`), or undefined: zero.
  std::vector<Tensor> gradients;
};

// The backward of `forward` for cotangents of the forward outputs `cotangents` (tensors of
// `forward` that are outputs: set_output) and gradients of the graph inputs `wrt` (floating
// point). Gradients of a tensor read by several nodes are summed; broadcasting sums the
// cotangent over the broadcast axes; integer and boolean tensors carry no gradient. The
// resulting graphs are unplanned. Throws InvalidArgument for a cotangent or wrt entry that is
// not as described, and NotSupported naming the node and its op when an op without a
// derivative rule (or a case its rule does not cover) lies on a path from wrt to the cotangents.
BackwardGraph backward(const Graph& forward, const std::vector<Tensor>& cotangents,
                       const std::vector<Tensor>& wrt);

}  // namespace eagle::op
