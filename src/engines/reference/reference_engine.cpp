#include "engines/reference/reference_engine.hpp"

#include <stdexcept>

#include "eagle/core/error.hpp"
#include "eagle/plan/operand_rules.hpp"
#include "engines/reference/dense_io.hpp"
#include "engines/reference/evaluators.hpp"

namespace eagle::reference {

namespace {

struct Step {
  op::Node node;
  Eval eval;
};

// Interprets the graph node by node in float64. Intermediates stay inside the call; each node's
// outputs are rounded to their declared dtype (a cast to f16 means f16), and the caller's
// outputs are written only once every node has succeeded.
class ReferencePlan : public plan::CompiledPlan {
 public:
  ReferencePlan(const op::Graph& graph, const plan::OperandLayout& layout) : graph_(graph) {
    const auto tensors = graph.tensors();
    position_.assign(tensors.size(), -1);
    for (int p = 0; p < layout.size(); ++p) {
      const op::Tensor& t = layout.tensor_at(p);
      position_[t.index()] = p;
      rules_.add(layout, t, Device::cpu(), /*row_major=*/false);
      (t.producer() < 0 ? inputs_ : outputs_).push_back(t);
    }
    for (const op::Node& n : graph.nodes()) steps_.push_back({n, evaluator_for(n.op())});
  }

  bool run(const plan::OperandBuffer* operands,
           const plan::ExecutionContext&) const noexcept override {
    if (!rules_.match(operands)) return false;
    try {
      compute(operands);
      return true;
    } catch (...) {
      return false;  // explain() computes again and raises what the math refused
    }
  }

  void explain(const plan::OperandBuffer* operands, const plan::ExecutionContext&) const override {
    rules_.explain(operands);
    compute(operands);
  }

 private:
  void compute(const plan::OperandBuffer* operands) const {
    Env env;
    env.values.resize(position_.size());
    for (const op::Tensor& t : inputs_)
      env.values[t.index()] = gather(operands[position_[t.index()]]);
    for (const Step& s : steps_) {
      s.eval(s.node, env);
      for (const auto& [port, t] : s.node.outputs()) {
        Dense& v = env.values[t.index()];
        if (v.dims != t.dims())
          throw std::logic_error("reference: " + s.node.name() + " produced '" + port +
                                 "' with other dims than inferred");
        round_to(v, t.dtype());
      }
    }
    for (const op::Tensor& t : outputs_)
      scatter(env.values[t.index()], operands[position_[t.index()]]);
  }

  op::Graph graph_;  // keeps the nodes the steps refer to
  std::vector<Step> steps_;
  plan::OperandRules rules_;
  std::vector<int> position_;  // per tensor index: its pack position, or -1
  std::vector<op::Tensor> inputs_, outputs_;
};

class ReferenceEngine : public plan::Engine {
 public:
  ReferenceEngine(int64_t id, const std::string& name) : Engine(id, name) {
    caps_.device = DeviceKind::cpu;
    caps_.dtypes = {DType::f64, DType::f32, DType::f16, DType::bf16};
  }
  const plan::Capabilities& capabilities() const override { return caps_; }

  void check_support(const op::Graph& graph, const plan::Facts&,
                     const DeviceProperties&) const override {
    for (const op::Node& n : graph.nodes())
      if (!evaluator_for(n.op()))
        throw NotSupported(name() + ": op '" + n.op() + "' has no reference evaluator");
    // Only sdpa and sdpa_bwd place sequences by ragged offsets: any other node reading or
    // writing a ragged tensor would see it as dense. Nodes that do not touch one are fine.
    for (const op::Node& n : graph.nodes()) {
      if (n.op() == "sdpa" || n.op() == "sdpa_bwd") continue;
      for (const op::Ports& ports : {n.inputs(), n.outputs()})
        for (const auto& [port, t] : ports)
          if (t.ragged_offset().defined())
            throw NotSupported(name() + ": tensor '" + t.name() + "' has a ragged offset; only " +
                               "sdpa and sdpa_bwd read ragged offsets, not " + n.op());
    }
  }

  std::shared_ptr<const plan::CompiledPlan> build_plan(
      const op::Graph& graph, const plan::Facts&, const plan::PlanConfig&,
      const plan::BuildContext& ctx) const override {
    return std::make_shared<ReferencePlan>(graph, *ctx.layout);
  }

 private:
  plan::Capabilities caps_;
};

}  // namespace

std::unique_ptr<plan::Engine> make_reference_engine(int64_t id, const std::string& name) {
  return std::make_unique<ReferenceEngine>(id, name);
}

}  // namespace eagle::reference
