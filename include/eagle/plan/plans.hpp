// Planning an operation graph: freeze, analyze once, rank into ONE plan list, build the first
// entry that builds, execute with a variant pack.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "eagle/op/graph.hpp"
#include "eagle/plan/engine.hpp"
#include "eagle/plan/manifest.hpp"
#include "eagle/plan/operands.hpp"

namespace eagle::plan {

class ExecutionPlans {
 public:
  // Plans `graph` for `device`: claims it (planning is one-shot), validates and freezes it,
  // classifies it, attaches its facts, asks the backend once per mode, and hands everything to
  // the family's heuristics hook. The manifest must outlive the plans.
  static ExecutionPlans create(const op::Graph& graph, const Manifest& manifest,
                               const DeviceProperties& device,
                               const std::vector<HeurMode>& modes = {HeurMode::A});
  // A one-entry plan list for a known (engine_id, knobs): replays an autotune result. Throws
  // InvalidArgument for an id of another family or knobs outside the engine's domain.
  static ExecutionPlans create_for(const op::Graph& graph, const Manifest& manifest,
                                   const DeviceProperties& device, int64_t engine_id,
                                   const Knobs& knobs);
  // The same for an attached device: its properties are queried, and engines see the Device
  // itself in their BuildContext (they may allocate or load code for it).
  static ExecutionPlans create(const op::Graph& graph, const Manifest& manifest, Device device,
                               const std::vector<HeurMode>& modes = {HeurMode::A});
  static ExecutionPlans create_for(const op::Graph& graph, const Manifest& manifest, Device device,
                                   int64_t engine_id, const Knobs& knobs);

  ExecutionPlans(ExecutionPlans&&) noexcept;
  ExecutionPlans& operator=(ExecutionPlans&&) noexcept;
  ~ExecutionPlans();

  const op::Graph& graph() const;
  const std::string& family() const;  // "" when the graph belongs to no family
  const Facts& facts() const;
  const OperandLayout& layout() const;

  // The plan list and the at-index APIs.
  int count() const;
  const PlanConfig& at(int index) const;
  const std::string& name_at(int index) const;
  // Builds entry `index` (cached). Throws NotSupported when its engine declines.
  void build_plan_at_index(int index);
  bool is_built(int index) const;
  std::size_t workspace_size_at_index(int index) const;              // of a built entry
  std::shared_ptr<const CompiledPlan> compiled_at(int index) const;  // of a built entry
  void execute_plan_at_index(int index, const VariantPack& pack, const ExecutionContext& ctx) const;

  // Pins entry `index`: build_plans then builds that one or raises its decline.
  void select_plan(int index);
  int selected() const;  // the entry execute() runs, -1 before build_plans
  // Walks the list from the selected index (0 when none) and keeps the first entry that builds;
  // a decline moves on. Returns its index. Throws NotSupported listing every decline.
  int build_plans();
  // Why each entry tried so far declined (index, reason).
  std::vector<std::pair<int, std::string>> declines() const;
  std::size_t workspace_size() const;

  // Runs the built plan with the caller's operands. Never throws unless the call is illegal,
  // then InvalidArgument names the rule and nothing ran.
  void execute(const VariantPack& pack, const ExecutionContext& ctx) const;
  // The compiled plan execute() runs (for callers that keep it, e.g. a recorded node).
  std::shared_ptr<const CompiledPlan> compiled() const;

  std::string describe() const;  // the plan list, one entry per line

  struct State;  // internal

 private:
  explicit ExecutionPlans(std::unique_ptr<State> s);
  // The state. A moved-from ExecutionPlans holds none: every call on it throws InvalidArgument
  // instead of dereferencing null.
  struct Holder {
    std::unique_ptr<State> state;
    State* operator->() const;
  };
  Holder s_;
};

// Runs `plan` with `pack`: the hot path, and the checker only when the plan refuses.
void run_or_explain(const CompiledPlan& plan, const VariantPack& pack, const ExecutionContext& ctx);

}  // namespace eagle::plan
