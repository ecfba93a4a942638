// PlanningOptions::prefer: named engines are tried before the ranked list, a named engine that
// declines leaves the choice to the list, and a name no engine has is refused when the kernel is
// made. On the CPU, with stand-in engines beside the reference whose results tell them apart.
#include <memory>

#include "eagle/engines/planned_kernel.hpp"
#include "stand_in_manifest.hpp"
#include "test_util.hpp"

namespace eagle::test {
namespace {

constexpr int64_t kN = 37;
constexpr float kFilled = 42.0f;

// Writes kFilled to every element of the graph's output (f32).
class FillPlan : public plan::CompiledPlan {
 public:
  explicit FillPlan(int out) : out_(out) {}
  bool run(const plan::OperandBuffer* ops, const plan::ExecutionContext&) const noexcept override {
    const plan::OperandBuffer& o = ops[out_];
    for (int64_t i = 0; i < o.numel(); ++i) static_cast<float*>(o.data)[i] = kFilled;
    return true;
  }
  void explain(const plan::OperandBuffer*, const plan::ExecutionContext&) const override {}

 private:
  int out_;
};

// "fill" builds a FillPlan; "refusing" declines every graph when its plan is built.
class StandIn : public plan::Engine {
 public:
  StandIn(int64_t id, const std::string& name) : Engine(id, name) {
    caps_.device = DeviceKind::cpu;
    caps_.dtypes = {DType::f32};
  }
  const plan::Capabilities& capabilities() const override { return caps_; }
  void check_support(const op::Graph&, const plan::Facts&, const DeviceProperties&) const override {
  }
  std::shared_ptr<const plan::CompiledPlan> build_plan(
      const op::Graph& graph, const plan::Facts&, const plan::PlanConfig&,
      const plan::BuildContext& ctx) const override {
    if (name() == "refusing") throw NotSupported("refusing: declines every graph");
    return std::make_shared<FillPlan>(ctx.layout->index_of(graph.nodes()[0].output("out")));
  }

 private:
  plan::Capabilities caps_;
};

std::unique_ptr<plan::Engine> make_stand_in(int64_t id, const std::string& name) {
  return std::make_unique<StandIn>(id, name);
}

// The reference ranked first (slot order), then the stand-ins.
const plan::Manifest& manifest() {
  static const plan::Manifest m(test::pointwise_beside_reference(
      {{"refusing", &make_stand_in, false}, {"fill", &make_stand_in, false}}));
  return m;
}

op::Graph neg_graph() {
  op::Graph g("neg");
  g.pointwise("neg", g.tensor({"x", {kN}, DType::f32})).set_output(true).set_name("y");
  return g;
}

// What the kernel planned with `prefer` computes for x (eagerly, on the CPU).
std::vector<double> run_with(const std::vector<std::string>& prefer, const Array& x) {
  engines::PlanningOptions options;
  options.prefer = prefer;
  const Kernel k = engines::planned_kernel(neg_graph(), options, manifest());
  const Stream stream(Device::cpu());
  const ThreadTeam team(1);
  const auto out = launch(k, {x}, {}, stream, team);
  stream.synchronize();
  return out[0].to_vector<double>();
}

TEST(PlannedPrefer, ANamedEngineIsKeptBeforeTheRankedList) {
  const Array x = random_array({kN}, DType::f32, Device::cpu());
  std::vector<double> negated = x.to_vector<double>();
  for (double& v : negated) v = -v;
  EXPECT_EQ(run_with({}, x), negated);  // the list's first: the reference
  EXPECT_EQ(run_with({"fill"}, x), std::vector<double>(kN, kFilled));
  // Names are taken in order: the reference named first wins over fill.
  EXPECT_EQ(run_with({"reference", "fill"}, x), negated);
}

TEST(PlannedPrefer, ANamedEngineThatDeclinesLeavesTheChoiceToTheList) {
  const Array x = random_array({kN}, DType::f32, Device::cpu());
  std::vector<double> negated = x.to_vector<double>();
  for (double& v : negated) v = -v;
  EXPECT_EQ(run_with({"refusing"}, x), negated);
  EXPECT_EQ(run_with({"refusing", "fill"}, x), std::vector<double>(kN, kFilled));
  // The builtin backend's name is known to the builtin manifest, not to this one.
  expect_invalid([&] { run_with({"cudnn"}, x); }, "prefer names 'cudnn'");
}

TEST(PlannedPrefer, AnUnknownNameIsRefusedWhenTheKernelIsMade) {
  engines::PlanningOptions options;
  options.prefer = {"fill", "no_such_engine"};
  expect_invalid([&] { engines::planned_kernel(neg_graph(), options, manifest()); },
                 "prefer names 'no_such_engine', which is neither an engine");
  // The builtin manifest knows its engines and its backend by name.
  options.prefer = {"native_attention", "native_attention_bwd", "cudnn", "cublaslt"};
  EXPECT_NO_THROW(engines::planned_kernel(neg_graph(), options));
}

}  // namespace
}  // namespace eagle::test
