#include "eagle/engines/planned_kernel.hpp"

#include <map>
#include <mutex>
#include <stdexcept>

#include "eagle/core/error.hpp"

namespace eagle::engines {

namespace {

// One device's plan and the operand template the call fills with addresses.
class PlannedCall : public BoundCall {
 public:
  PlannedCall(plan::ExecutionPlans plans, Device device)
      : plans_(std::make_shared<plan::ExecutionPlans>(std::move(plans))),
        compiled_(plans_->compiled()) {
    const plan::OperandLayout& layout = plans_->layout();
    for (int p = 0; p < layout.size(); ++p) {
      const op::Tensor& t = layout.tensor_at(p);
      // Recorded arrays are dense; run() fills the address.
      template_.push_back(plan::dense_buffer(nullptr, t.dims(), t.dtype(), device));
    }
  }
  std::size_t workspace_bytes() const override { return compiled_->workspace_bytes(); }

  void run(void* const* data, void* workspace, void* stream,
           const ThreadTeam* team) const override {
    plan::OperandBuffer buffers[kMaxBoundCallArrays];
    for (std::size_t i = 0; i < template_.size(); ++i) {
      buffers[i] = template_[i];
      buffers[i].data = data[i];
    }
    const plan::ExecutionContext ctx{stream, nullptr, workspace, workspace_bytes(), team};
    if (compiled_->run(buffers, ctx)) return;
    compiled_->explain(buffers, ctx);
    throw std::logic_error("planned call: the plan refused the call but names no rule");
  }

 private:
  std::shared_ptr<plan::ExecutionPlans> plans_;
  std::shared_ptr<const plan::CompiledPlan> compiled_;
  std::vector<plan::OperandBuffer> template_;
};

class PlannedBinder : public CallBinder {
 public:
  PlannedBinder(op::Graph graph, std::vector<plan::HeurMode> modes, const plan::Manifest& manifest)
      : graph_(std::move(graph)), modes_(std::move(modes)), manifest_(manifest) {}

  std::shared_ptr<const BoundCall> bind(Device device) const override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = calls_.find(device.str());
    if (it != calls_.end()) return it->second;
    plan::ExecutionPlans plans = plan::ExecutionPlans::create(
        graph_.clone(), manifest_, DeviceProperties::query(device), modes_);
    plans.build_plans();
    auto call = std::make_shared<const PlannedCall>(std::move(plans), device);
    calls_.emplace(device.str(), call);
    return call;
  }

 private:
  op::Graph graph_;
  std::vector<plan::HeurMode> modes_;
  const plan::Manifest& manifest_;
  mutable std::mutex mutex_;
  mutable std::map<std::string, std::shared_ptr<const BoundCall>> calls_;
};

}  // namespace

Kernel planned_kernel(const op::Graph& graph, const std::vector<plan::HeurMode>& modes,
                      const plan::Manifest& manifest) {
  graph.validate();
  const std::vector<op::Tensor> operands = graph.operand_tensors();
  if (operands.size() > static_cast<std::size_t>(kMaxBoundCallArrays))
    throw InvalidArgument("planned_kernel: graph '" + graph.name() + "' has " +
                          std::to_string(operands.size()) + " operands; at most " +
                          std::to_string(kMaxBoundCallArrays));
  KernelDef def;
  def.name = graph.name();
  std::vector<ArrayMeta> outputs;
  std::vector<std::pair<std::string, ArrayMeta>> inputs;
  for (const op::Tensor& t : operands) {
    const bool input = t.producer() < 0;
    def.arrays.push_back({t.name(), input ? Access::read : Access::write});
    (input ? inputs.emplace_back(t.name(), ArrayMeta{t.dims(), t.dtype()}).second
           : outputs.emplace_back(ArrayMeta{t.dims(), t.dtype()}));
  }
  def.per_sample = false;
  def.infer = [name = graph.name(), inputs, outputs](const std::vector<ArrayMeta>& given,
                                                     const std::vector<ScalarArg>&) {
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const ArrayMeta& want = inputs[i].second;
      if (given[i].shape != want.shape || given[i].dtype != want.dtype)
        throw InvalidArgument(name + ": argument '" + inputs[i].first + "' is " +
                              std::string(dtype_name(given[i].dtype)) + shape_str(given[i].shape) +
                              "; the operation graph declares " +
                              std::string(dtype_name(want.dtype)) + shape_str(want.shape));
    }
    return outputs;
  };
  def.binder = std::make_shared<PlannedBinder>(graph.clone(), modes, manifest);
  return Kernel(std::move(def));
}

}  // namespace eagle::engines
