// Internal: what a derivative rule (OpSchema::grad) sees of one forward node while op::backward
// builds the backward graph, and the few builders the rules share.
#pragma once

#include <string>
#include <vector>

#include "eagle/op/graph.hpp"

namespace eagle::op {

namespace detail {
class BackwardBuilder;
}

class GradContext {
 public:
  GradContext(detail::BackwardBuilder& b, Node node) : b_(b), node_(std::move(node)) {}

  const Node& node() const { return node_; }
  // The backward graph the rule adds nodes to.
  Graph& graph();

  // The cotangent of output `port` (undefined when nothing flows into it).
  Tensor cot(const std::string& port);
  // The cotangent of output `port` viewed with `dims` (same element count; the source is
  // reshaped when it is read), possible only while it is exactly the cotangent given for a
  // forward output and nothing read it yet; undefined otherwise.
  Tensor cot_as(const std::string& port, const Dims& dims);
  // Whether input `port` wants a gradient (wired, floating, depends on what is differentiated).
  bool wants(const std::string& port) const;
  // The forward value of input or output `port` as a tensor of the backward graph: a forward
  // operand as is, anything else recomputed (an output the node does not produce too: the
  // recompute runs norms with training and sdpa with generate_stats).
  Tensor value(const std::string& port);
  // value(port) with its last two dims swapped (a strided view).
  Tensor transposed(const std::string& port);
  // Several outputs of the node, all from the forward when it exposes each of them, else all
  // recomputed by one rerun (so that they agree with one another).
  std::vector<Tensor> values(const std::vector<std::string>& ports);
  // Whether output `port` is a forward operand (the forward kernel writes it).
  bool exposed(const std::string& port) const;
  // A constant: rank 0, or `dims` (a stride-0 broadcast of one element).
  Tensor constant(double value, DType dtype, const Dims& dims = {});
  // Adds `contribution` to the gradient of input `port` (summing broadcast axes and casting to
  // the input's dtype as needed). Ignored when the port does not want a gradient.
  void grad(const std::string& port, const Tensor& contribution);
  // Throws NotSupported naming the node, its op and `why`.
  [[noreturn]] void refuse(const std::string& why) const;

  // Builders over the backward graph.
  Tensor pw(const std::string& op, const Tensor& a);
  Tensor pw(const std::string& op, const Tensor& a, const Tensor& b);
  Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
  Tensor cast(const Tensor& a, DType dtype);
  // `x` broadcast to `dims`.
  Tensor expand(const Tensor& x, const Dims& dims);
  // Zeros of `dims` and `dtype`.
  Tensor zeros(const Dims& dims, DType dtype);
  // Sums `x` over `axes` (keepdim as given).
  Tensor sum(const Tensor& x, const std::vector<int64_t>& axes, bool keepdim);

 private:
  detail::BackwardBuilder& b_;
  Node node_;
};

}  // namespace eagle::op
