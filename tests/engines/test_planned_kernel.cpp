// A planned operation recorded in a graph: the planner picks the engine when the graph is built,
// the graph runs whatever the plan launches, bind swaps its arrays, and eager launch works too.
#include <cmath>

#include "eagle/engines/builtin.hpp"
#include "eagle/engines/planned_kernel.hpp"
#include "test_util.hpp"

namespace eagle::test {
namespace {

constexpr int64_t kN = 257;

// y = relu(a * b + c): three nodes, two virtual intermediates.
op::Graph fused_graph() {
  op::Graph g("relu_fma");
  const op::Tensor a = g.tensor({"a", {kN}, DType::f32});
  const op::Tensor b = g.tensor({"b", {kN}, DType::f32});
  const op::Tensor c = g.tensor({"c", {kN}, DType::f32});
  g.pointwise("relu", g.pointwise("add", g.pointwise("mul", a, b), c))
      .set_output(true)
      .set_name("y");
  return g;
}

// y = a * b: one node, which the native CUDA engine serves too.
op::Graph mul_graph() {
  op::Graph g("mul");
  const op::Tensor a = g.tensor({"a", {kN}, DType::f32});
  const op::Tensor b = g.tensor({"b", {kN}, DType::f32});
  g.pointwise("mul", a, b).set_output(true).set_name("y");
  return g;
}

std::vector<double> product(const Array& a, const Array& b) {
  const auto av = a.to_vector<double>(), bv = b.to_vector<double>();
  std::vector<double> y(av.size());
  for (std::size_t i = 0; i < y.size(); ++i) y[i] = av[i] * bv[i];
  return y;
}

std::vector<double> relu_fma(const Array& a, const Array& b, const Array& c) {
  const auto av = a.to_vector<double>(), bv = b.to_vector<double>(), cv = c.to_vector<double>();
  std::vector<double> y(av.size());
  for (std::size_t i = 0; i < y.size(); ++i)
    y[i] = std::max(0.0, static_cast<double>(static_cast<float>(av[i] * bv[i])) + cv[i]);
  return y;
}

class PlannedCall : public OnDevice {};
EAGLE_ON_EVERY_DEVICE(PlannedCall);

TEST_P(PlannedCall, KernelParametersAreTheGraphOperands) {
  const Kernel k = engines::planned_kernel(fused_graph());
  EXPECT_EQ(k.name(), "relu_fma");
  ASSERT_EQ(k.def().arrays.size(), 4u);
  EXPECT_EQ(k.def().arrays[0].name, "a");
  EXPECT_EQ(k.def().arrays[2].name, "c");
  EXPECT_EQ(k.def().arrays[3].name, "y");
  EXPECT_EQ(k.def().arrays[3].access, Access::write);
  EXPECT_EQ(k.num_inputs(), 3);
  EXPECT_EQ(k.num_outputs(), 1);
}

TEST_P(PlannedCall, RecordedOpRunsInAGraphAndFollowsBind) {
  const Kernel k = engines::planned_kernel(mul_graph());
  const Array a = random_array({kN}, DType::f32, device());
  const Array b = random_array({kN}, DType::f32, device());
  Graph g = Graph::record([&](Recorder& r) {
    const Value y = r.call(k, {r.param("a", a), r.param("b", b)});
    r.result(r.call(kernels::scale(), {y, 2.0}));  // an ordinary kernel reads the planned output
  });
  g.build(device());
  auto want = product(a, b);
  for (double& v : want) v *= 2;
  EXPECT_CLOSE(g()[0].to_vector<double>(), want, 1e-6);

  const Array a2 = random_array({kN}, DType::f32, device());
  std::vector<std::string> warnings;
  g.set_warning_handler([&](const std::string& w) { warnings.push_back(w); });
  void* exec = g.native_graph_exec();
  g.bind("a", a2);
  want = product(a2, b);
  for (double& v : want) v *= 2;
  EXPECT_CLOSE(g()[0].to_vector<double>(), want, 1e-6);
  // The plan is captured again and its kernel node patched in place: no rebuild.
  EXPECT_EQ(g.rebuild_count(), 0) << (warnings.empty() ? "" : warnings[0]);
  EXPECT_EQ(g.native_graph_exec(), exec);
}

TEST_P(PlannedCall, EagerLaunchRunsThePlan) {
  const Kernel k = engines::planned_kernel(mul_graph());
  const Array a = random_array({kN}, DType::f32, device());
  const Array b = random_array({kN}, DType::f32, device());
  const Stream stream(device());
  const ThreadTeam team(1);
  const auto out = launch(k, {a, b}, {}, stream, team);
  stream.synchronize();
  EXPECT_CLOSE(out[0].to_vector<double>(), product(a, b), 1e-6);
}

// Three nodes with virtual intermediates: the reference engine serves it on the CPU, the native
// fused pointwise engine on a GPU (one launch; each node rounded to f32 as the reference does).
TEST_P(PlannedCall, MultiNodeGraph) {
  const Kernel k = engines::planned_kernel(fused_graph());
  const Array a = random_array({kN}, DType::f32, device());
  const Array b = random_array({kN}, DType::f32, device());
  const Array c = random_array({kN}, DType::f32, device());
  Graph g = Graph::record([&](Recorder& r) {
    r.result(r.call(k, {r.param("a", a), r.param("b", b), r.param("c", c)}));
  });
  g.build(device());
  EXPECT_CLOSE(g()[0].to_vector<double>(), relu_fma(a, b, c), 1e-6);
}

TEST_P(PlannedCall, SingleKernelOpAddsNoNode) {
  op::Graph og("add");
  const op::Tensor a = og.tensor({"a", {kN}, DType::f32});
  const op::Tensor b = og.tensor({"b", {kN}, DType::f32});
  og.pointwise("add", a, b).set_output(true);
  const Kernel k = engines::planned_kernel(og);
  const Array x = random_array({kN}, DType::f32, device());
  const Array y = random_array({kN}, DType::f32, device());
  Graph g = Graph::record([&](Recorder& r) {
    r.result(r.call(k, {r.param("x", x), r.param("y", y)}));
  });
  g.build(device());
  EXPECT_EQ(g.native_node_count(), 1);
  const auto xv = x.to_vector<double>(), yv = y.to_vector<double>();
  std::vector<double> want(xv.size());
  for (std::size_t i = 0; i < want.size(); ++i) want[i] = xv[i] + yv[i];
  EXPECT_CLOSE(g()[0].to_vector<double>(), want, 1e-6);
}

// Planned with autotune: the entries that build are timed on scratch operands when the kernel is
// first planned for a device (on a GPU cuBLASLt's heuristic entries; on the CPU the reference),
// the fastest kept. The second operand is a transposed view, so the scratch spans its strides,
// not its dims.
TEST_P(PlannedCall, AnAutotunedMatmulWithATransposedOperandRuns) {
  constexpr int64_t m = 33, k = 17, n = 9;
  op::Graph og("matmul_bt");
  const op::Tensor a = og.tensor({"a", {m, k}, DType::f32});
  op::Tensor b = og.tensor({"b", {k, n}, DType::f32});
  b.set_strides({1, k});
  og.matmul(a, b).set_output(true).set_name("y");
  const Kernel mm = engines::planned_kernel(
      og, engines::PlanningOptions{{plan::HeurMode::A}, plan::AutotuneOptions{4, 1, 2}, false});
  const Array av = random_array({m, k}, DType::f32, device());
  const Array bt = random_array({n, k}, DType::f32, device());  // b's transpose, row-major
  const Array bv = Array::wrap(bt.data(), {k, n}, DType::f32, device(), {1, k});
  const Stream stream(device());
  const ThreadTeam team(1);
  const auto out = launch(mm, {av, bv}, {}, stream, team);
  stream.synchronize();
  const std::vector<double> x = av.to_vector<double>(), w = bt.to_vector<double>();
  std::vector<double> want(static_cast<std::size_t>(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j)
      for (int64_t p = 0; p < k; ++p)
        want[static_cast<std::size_t>(i * n + j)] +=
            x[static_cast<std::size_t>(i * k + p)] * w[static_cast<std::size_t>(j * k + p)];
  EXPECT_CLOSE(out[0].to_vector<double>(), want, 1e-5);
}

TEST(PlannedCallErrors, AutotuneOptionsOutOfRangeAreRefusedWhenTheKernelIsMade) {
  for (const plan::AutotuneOptions& bad :
       {plan::AutotuneOptions{0, 2, 10}, plan::AutotuneOptions{8, -1, 10},
        plan::AutotuneOptions{8, 2, 0}}) {
    expect_invalid(
        [&] {
          engines::planned_kernel(mul_graph(),
                                  engines::PlanningOptions{{plan::HeurMode::A}, bad, false});
        },
        "autotune: options.");
  }
}

// Runs `kernel` (planned from `og`, sdpa_bwd) on `inputs` in a recorded graph on the CPU and
// compares it with the plan list of `og` run directly.
void check_sdpa_bwd_kernel(const op::Graph& og, const Kernel& kernel,
                           const std::vector<Array>& inputs) {
  ASSERT_EQ(kernel.def().arrays.size(), 11u);
  const Device cpu = Device::cpu();
  Graph g = Graph::record([&](Recorder& r) {
    std::vector<Arg> args;
    for (std::size_t i = 0; i < inputs.size(); ++i)
      args.emplace_back(r.param(std::string("in") + std::to_string(i), inputs[i]));
    std::vector<Value> outs = r.call_all(kernel, args);
    r.result(outs);
  });
  g.build(cpu);
  const auto& got = g();
  ASSERT_EQ(got.size(), 3u);
  // The same operation through its plan list, directly.
  plan::ExecutionPlans plans = engines::create_execution_plans(og.clone(), cpu);
  plans.build_plans();
  plan::VariantPack pack(plans.layout());
  std::vector<Array> want;
  const std::vector<op::Tensor> operands = plans.graph().operand_tensors();
  std::size_t in = 0;
  for (const op::Tensor& t : operands) {
    if (t.producer() < 0) {
      pack.set(t, plan::Operand(inputs[in++]));
    } else {
      want.push_back(Array::empty(t.dims(), t.dtype(), cpu));
      pack.set(t, plan::Operand(want.back()));
    }
  }
  plans.execute(pack, CallContext{});
  for (std::size_t i = 0; i < 3; ++i)
    EXPECT_EQ(got[i].to_vector<float>(), want[i].to_vector<float>()) << operands[8 + i].name();
}

// sdpa_bwd with eleven operands (past the old six-array limit), recorded and run on the CPU; the
// graph's result equals executing the same operation graph directly through its plan list.
TEST(PlannedCallArity, SdpaBackwardWithElevenOperandsRunsInAGraph) {
  const int64_t h = 2, d = 4, tq = 5, tk = 6;
  op::Graph og("sdpa_bwd");
  const op::Tensor q = og.tensor({"q", {tq, h, d}, DType::f32}),
                   k = og.tensor({"k", {tk, h, d}, DType::f32}),
                   v = og.tensor({"v", {tk, h, d}, DType::f32}),
                   o = og.tensor({"o", {tq, h, d}, DType::f32}),
                   d_o = og.tensor({"d_o", {tq, h, d}, DType::f32}),
                   stats = og.tensor({"stats", {tq, h}, DType::f32}),
                   cq = og.tensor({"cu_q", {3}, DType::i32}),
                   ck = og.tensor({"cu_kv", {3}, DType::i32});
  auto grads = og.op("sdpa_bwd", {{"q", q},
                                  {"k", k},
                                  {"v", v},
                                  {"o", o},
                                  {"d_o", d_o},
                                  {"stats", stats},
                                  {"cu_seqlens_q", cq},
                                  {"cu_seqlens_kv", ck}});
  for (auto& [port, t] : grads) t.set_output(true).set_name(port);
  // Asked to autotune, a graph reading cu_seqlens keeps the list's order (zero-filled scratch
  // offsets would time an empty batch); it runs the same either way.
  const Device cpu = Device::cpu();
  const std::vector<Array> inputs = {random_array({tq, h, d}, DType::f32, cpu),
                                     random_array({tk, h, d}, DType::f32, cpu),
                                     random_array({tk, h, d}, DType::f32, cpu),
                                     random_array({tq, h, d}, DType::f32, cpu),
                                     random_array({tq, h, d}, DType::f32, cpu),
                                     random_array({tq, h}, DType::f32, cpu),
                                     Array::from(std::vector<int32_t>{0, 2, 5}, {3}, cpu),
                                     Array::from(std::vector<int32_t>{0, 3, 6}, {3}, cpu)};
  for (bool autotune : {false, true}) {
    SCOPED_TRACE(autotune ? "autotune" : "list order");
    engines::PlanningOptions options;
    if (autotune) options.autotune = plan::AutotuneOptions{};
    check_sdpa_bwd_kernel(og, engines::planned_kernel(og, options), inputs);
  }
}

TEST(PlannedCallErrors, ArgumentsMustMatchTheDeclaredOperands) {
  const Kernel k = engines::planned_kernel(fused_graph());
  const Array wrong = random_array({kN + 1}, DType::f32, Device::cpu());
  const Array ok = random_array({kN}, DType::f32, Device::cpu());
  const Array ok2 = random_array({kN}, DType::f32, Device::cpu());
  expect_throw_with<InvalidArgument>(
      [&] {
        Graph::record([&](Recorder& r) {
          r.call(k, {r.param("a", wrong), r.param("b", ok), r.param("c", ok2)});
        });
      },
      {"argument 'a'"});
  const Array f64 = random_array({kN}, DType::f64, Device::cpu());
  expect_throw_with<InvalidArgument>(
      [&] {
        const Stream s(Device::cpu());
        const ThreadTeam team(1);
        launch(k, {ok, f64, ok}, {}, s, team);
      },
      {"argument 'b'"});
  // The plan reads dense operands: a strided view is refused, as for every kernel.
  const Array wide = random_array({kN, 2}, DType::f32, Device::cpu());
  const Array column = Array::wrap(wide.data(), {kN}, DType::f32, Device::cpu(), {2});
  expect_throw_with<InvalidArgument>(
      [&] {
        const Stream s(Device::cpu());
        const ThreadTeam team(1);
        launch(k, {column, ok, ok2}, {}, s, team);
      },
      {"argument 'a'"});
}

TEST(PlannedCallErrors, TheTemplateGraphStaysUnplanned) {
  op::Graph g = fused_graph();
  const Kernel k = engines::planned_kernel(g);
  const Array x = random_array({kN}, DType::f32, Device::cpu());
  const Array y = random_array({kN}, DType::f32, Device::cpu());
  const Array z = random_array({kN}, DType::f32, Device::cpu());
  Graph graph = Graph::record([&](Recorder& r) {
    r.result(r.call(k, {r.param("a", x), r.param("b", y), r.param("c", z)}));
  });
  graph.build(Device::cpu());
  EXPECT_FALSE(g.frozen());  // each device planned its own copy
  EXPECT_NO_THROW(engines::create_execution_plans(g, Device::cpu()).build_plans());
}

}  // namespace
}  // namespace eagle::test
