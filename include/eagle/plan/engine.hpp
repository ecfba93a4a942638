// The engine contract: capabilities, facts, check_support / build_plan, and the compiled plan
// whose execute path reads a table fixed at build and never throws.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "eagle/core/device.hpp"
#include "eagle/core/dtype.hpp"
#include "eagle/kernel/call.hpp"
#include "eagle/op/graph.hpp"
#include "eagle/plan/operands.hpp"

namespace eagle::plan {

enum class HeurMode : uint8_t { A, FALLBACK, OPENSOURCE };
std::string_view heur_mode_name(HeurMode mode);

// A configuration's knobs by name (sorted, so a config has one spelling).
using Knobs = std::map<std::string, int64_t>;

// One entry of the plan list. Its identity is (engine_id, knobs).
struct PlanConfig {
  int64_t engine_id = -1;
  Knobs knobs;
  // The heuristic mode whose block produced it; none for the backend's delegating entry.
  std::optional<HeurMode> mode;
  std::string name;  // "engine[knob=v,...]", filled by the planner
  bool same_config(const PlanConfig& o) const {
    return engine_id == o.engine_id && knobs == o.knobs;
  }
};

// What an analyzer records about a graph, once, after the freeze. Facts describe; they never
// reject (capabilities judge). A family's analyzer returns a subclass with its own fields.
struct Facts {
  virtual ~Facts() = default;
  std::vector<std::string> ops;  // node ops in order
  // The dtype of the floating data the graph carries (its first floating input), f32 if none.
  DType io_dtype = DType::f32;
  virtual std::string describe() const;
};
using Analyzer = std::shared_ptr<const Facts> (*)(const op::Graph& graph);
// Fills the fields every family's facts share (an analyzer calls it first).
void describe_graph(const op::Graph& graph, Facts& facts);
// The analyzer of a family that declares none: the shared fields only.
std::shared_ptr<const Facts> base_facts(const op::Graph& graph);
// The facts of a frozen graph for `analyzer`: computed once and shared by every caller.
std::shared_ptr<const Facts> facts_for(const op::Graph& graph, Analyzer analyzer);

// What an engine declares it can serve: a device kind, an sm range (CUDA, major*10+minor,
// inclusive: a kernel for a line serves the members that ship later), io dtypes and the domain
// of each knob (the configs the heuristics may name).
struct Capabilities {
  DeviceKind device = DeviceKind::cpu;
  int sm_lo = 0;
  int sm_hi = 0;
  std::vector<DType> dtypes;
  std::map<std::string, std::vector<int64_t>> knobs;
  // Why this row does not serve the facts on the device, or empty.
  std::string mismatch(const Facts& facts, const DeviceProperties& device) const;
  // Why `knobs` is not a point of the declared domain (a missing axis, an unknown knob, a
  // value outside), or empty.
  std::string knob_error(const Knobs& knobs) const;
  // The first point of every domain: the config that names each axis.
  Knobs first_point() const;
  // Every point of the domains' cartesian product, knobs in name order with the first varying
  // slowest and each domain in its declared order (so first_point() leads).
  std::vector<Knobs> points() const;
};

// Explicit per-call resources (stream, the engine library's handle, workspace, threads): the
// one call context of every node of eagle (eagle/kernel/call.hpp). Nothing is read from ambient
// state.
using ExecutionContext = CallContext;

// A plan built for one graph and config. run() is the only execute path: it reads the table
// fixed at build, launches, and never throws; what it refuses (returns false, nothing launched)
// goes to explain(), which reads the same table and throws InvalidArgument naming the rule.
class CompiledPlan {
 public:
  virtual ~CompiledPlan() = default;
  virtual std::size_t workspace_bytes() const { return 0; }
  // The library whose handle run() expects in ctx.handle (cuDNN, cuBLASLt), or none.
  virtual const Library* library() const { return nullptr; }
  virtual bool run(const OperandBuffer* operands, const ExecutionContext& ctx) const noexcept = 0;
  virtual void explain(const OperandBuffer* operands, const ExecutionContext& ctx) const = 0;
  // A plan that builds its own CUDA graph nodes (cudnn-frontend's populate_cuda_graph): adds
  // them to `graph`, an empty cudaGraph_t; false when it does not (run() is stream-captured).
  virtual bool populate_cuda_graph(const OperandBuffer* operands, const ExecutionContext& ctx,
                                   void* graph) const {
    (void)operands, (void)ctx, (void)graph;
    return false;
  }
  // Brings a graph it populated up to date with new operand addresses (cudnn-frontend's
  // update_cuda_graph); false when it cannot (the graph is populated anew).
  virtual bool update_cuda_graph(const OperandBuffer* operands, const ExecutionContext& ctx,
                                 void* graph) const {
    (void)operands, (void)ctx, (void)graph;
    return false;
  }
};

struct BuildContext {
  DeviceProperties device;  // what the plan is built for (serialisable: may be ahead of time)
  const OperandLayout* layout = nullptr;
  // The device the plan will run on, when it is attached (planning for a recorded graph's
  // device); none when planning from a descriptor alone.
  std::optional<Device> target;
};

class Engine {
 public:
  Engine(int64_t id, std::string name) : id_(id), name_(std::move(name)) {}
  virtual ~Engine() = default;
  int64_t id() const { return id_; }
  const std::string& name() const { return name_; }
  virtual const Capabilities& capabilities() const = 0;
  // Accepts, or declines by throwing NotSupported (only that: anything else is a bug).
  virtual void check_support(const op::Graph& graph, const Facts& facts,
                             const DeviceProperties& device) const = 0;
  // The expensive step, once per graph and config (the planner caches it). May decline with
  // NotSupported too.
  virtual std::shared_ptr<const CompiledPlan> build_plan(const op::Graph& graph, const Facts& facts,
                                                         const PlanConfig& config,
                                                         const BuildContext& ctx) const = 0;

 private:
  int64_t id_;
  std::string name_;
};

}  // namespace eagle::plan
