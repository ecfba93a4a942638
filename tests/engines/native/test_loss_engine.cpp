// The native loss engine (cross_entropy forward) against the reference engine on fresh random
// logits, with ignored targets, label smoothing and every reduction (GPU; skipped without one),
// and its declines and its place in the plan list (everywhere).
#include <gtest/gtest.h>

#include "cuda_build.hpp"
#include "native_structured.hpp"

namespace eagle::test::native {
namespace {

int64_t loss_id() {
  return engine("loss", "native_loss");
}

struct CeCase {
  std::string reduction = "mean";
  double label_smoothing = 0.0;
  int64_t ignore_index = -100;
  DType targets = DType::i64;
  double ignore_fraction = 0.2;
};

op::Graph ce_graph(const op::Dims& dims, DType dtype, const CeCase& c) {
  op::Graph g("cross_entropy");
  const op::Tensor logits = g.tensor({"logits", dims, dtype});
  const op::Tensor targets = g.tensor({"targets", {dims[0]}, c.targets});
  auto outs = g.op("cross_entropy", {{"logits", logits}, {"targets", targets}},
                   {{"reduction", c.reduction},
                    {"label_smoothing", c.label_smoothing},
                    {"ignore_index", c.ignore_index},
                    {"output_lse", true}});
  for (auto& [port, t] : outs) t.set_output(true).set_name(port);
  return g;
}

sweep::HostInputs ce_inputs(const op::Graph& g, const CeCase& c) {
  const op::Node n = g.nodes()[0];
  const op::Tensor logits = n.input("logits"), targets = n.input("targets");
  const int64_t rows = logits.dims()[0], classes = logits.dims()[1];
  std::vector<int64_t> t =
      random_targets(static_cast<std::size_t>(rows), classes, c.ignore_index, c.ignore_fraction);
  return {{logits, random_array(logits.dims(), logits.dtype(), Device::cpu(), -4, 4)},
          {targets, from_ints(t, {rows}, c.targets, Device::cpu())}};
}

void check(const op::Dims& dims, DType dtype, const CeCase& c) {
  SCOPED_TRACE("reduction " + c.reduction + ", label smoothing " +
               std::to_string(c.label_smoothing) + ", ignore_index " +
               std::to_string(c.ignore_index) + ", targets " + std::string(dtype_name(c.targets)));
  const op::Graph g = ce_graph(dims, dtype, c);
  sweep::compare_with_reference(manifest(), loss_id(), {}, g, ce_inputs(g, c));
}

// ---- GPU: against the reference ----

class NativeCrossEntropy : public NativeGpuCase {};

TEST_P(NativeCrossEntropy, EveryReductionWithIgnoredTargetsAndLabelSmoothing) {
  EAGLE_SKIP_UNLESS_RUNS_HERE(loss_id());
  for (const char* red : {"none", "sum", "mean"})
    for (double ls : {0.0, 0.1}) {
      CeCase c;
      c.reduction = red;
      c.label_smoothing = ls;
      check(GetParam().dims, GetParam().dtype, c);
    }
}

TEST_P(NativeCrossEntropy, I32TargetsAndAnIgnoreIndexInsideTheClasses) {
  EAGLE_SKIP_UNLESS_RUNS_HERE(loss_id());
  CeCase c;
  c.targets = DType::i32;
  c.ignore_index = 0;
  c.label_smoothing = 0.25;
  check(GetParam().dims, GetParam().dtype, c);
}

INSTANTIATE_TEST_SUITE_P(native_loss, NativeCrossEntropy,
                         ::testing::ValuesIn(dtype_shapes(row_shapes())), dtype_shape_name);

TEST(NativeCrossEntropyEdges, EveryTargetIgnoredGivesANaNMeanAndAZeroSum) {
  EAGLE_SKIP_UNLESS_RUNS_HERE(loss_id());
  for (const char* red : {"mean", "sum", "none"}) {
    CeCase c;
    c.reduction = red;
    c.ignore_fraction = 1.0;
    check({9, 33}, DType::f32, c);
  }
}

TEST(NativeCrossEntropyEdges, FullLabelSmoothing) {
  EAGLE_SKIP_UNLESS_RUNS_HERE(loss_id());
  CeCase c;
  c.label_smoothing = 1.0;
  check({17, 1000}, DType::bf16, c);
}

// A warp per row with more rows than resident warps (some warps take two), and rows fewer than
// half the resident warps split into warp chunks (odd lengths: the scalar path, a short last
// chunk), on an H200's 132 SMs.
TEST(NativeCrossEntropyShapes, ManyRowsAWarpEachAndFewRowsInWarpChunks) {
  EAGLE_SKIP_UNLESS_RUNS_HERE(loss_id());
  for (DType d : float_dtypes())
    for (const op::Dims& dims :
         {op::Dims{4500, 2056}, op::Dims{2200, 3001}, op::Dims{300, 5003}, op::Dims{64, 16400}})
      for (const char* red : {"none", "mean"})
        for (double ls : {0.0, 0.1}) {  // without smoothing the plain sum is not computed
          SCOPED_TRACE(std::string(dtype_name(d)) + " [" + dims_name(dims) + "] smoothing " +
                       std::to_string(ls));
          CeCase c;
          c.reduction = red;
          c.label_smoothing = ls;
          check(dims, d, c);
        }
}

// A target outside the classes: the reference refuses the call; the GPU plan cannot see the
// targets, so it gives that row a NaN loss (and reads nothing outside the row).
TEST(NativeCrossEntropyEdges, ATargetOutsideTheClassesGivesNaN) {
  EAGLE_SKIP_UNLESS_RUNS_HERE(loss_id());
  CeCase c;
  c.reduction = "none";
  op::Graph g = ce_graph({4, 10}, DType::f32, c);
  plan::ExecutionPlans plans =
      plan::ExecutionPlans::create(g, manifest(), DeviceProperties::query(Device::cuda(0)));
  ASSERT_EQ(plans.at(plans.build_plans()).engine_id, loss_id());
  const op::Node n = g.nodes()[0];
  const Array logits = random_array({4, 10}, DType::f32, Device::cuda(0), -4, 4);
  const Array targets = from_ints({1, 10, -100, -5}, {4}, DType::i64, Device::cuda(0));
  // A finite fill (not the NaN poison): the NaN losses must be the kernel's.
  const Array loss = from_doubles({7, 7, 7, 7}, {4}, DType::f32, Device::cuda(0));
  const Array lse = poisoned({4}, DType::f32, Device::cuda(0));
  plan::VariantPack pack(plans.layout());
  pack.set(n.input("logits"), logits).set(n.input("targets"), targets);
  pack.set(n.output("loss"), loss).set(n.output("lse"), lse);
  const Stream stream(Device::cuda(0));
  plans.execute(pack, CallContext::on(stream));
  stream.synchronize();
  const std::vector<double> l = values(loss);
  EXPECT_TRUE(std::isfinite(l[0]));
  EXPECT_TRUE(std::isnan(l[1]));
  EXPECT_EQ(l[2], 0.0);
  EXPECT_TRUE(std::isnan(l[3]));
  for (double v : values(lse)) EXPECT_TRUE(std::isfinite(v));
}

// ---- the backward ----

op::Graph ce_bwd_graph(const op::Dims& dims, DType dtype, const CeCase& c, bool with_lse) {
  op::Graph g("cross_entropy_bwd");
  op::Ports ports = {
      {"logits", g.tensor({"logits", dims, dtype})},
      {"targets", g.tensor({"targets", {dims[0]}, c.targets})},
      {"dloss",
       g.tensor({"dloss", c.reduction == "none" ? op::Dims{dims[0]} : op::Dims{}, DType::f32})}};
  if (with_lse) ports.emplace_back("lse", g.tensor({"lse", {dims[0]}, DType::f32}));
  g.op("cross_entropy_bwd", ports,
       {{"reduction", c.reduction},
        {"label_smoothing", c.label_smoothing},
        {"ignore_index", c.ignore_index}})
      .at("dlogits")
      .set_output(true)
      .set_name("dlogits");
  return g;
}

sweep::HostInputs ce_bwd_inputs(const op::Graph& g, const CeCase& c) {
  const op::Node n = g.nodes()[0];
  const op::Tensor logits = n.input("logits"), targets = n.input("targets");
  const int64_t rows = logits.dims()[0], classes = logits.dims()[1];
  sweep::HostInputs in = {
      {logits, random_array(logits.dims(), logits.dtype(), Device::cpu(), -4, 4)},
      {targets, from_ints(random_targets(static_cast<std::size_t>(rows), classes, c.ignore_index,
                                         c.ignore_fraction),
                          {rows}, c.targets, Device::cpu())},
      {n.input("dloss"), random_array(n.input("dloss").dims(), DType::f32, Device::cpu(), 0.5, 2)}};
  // A given lse is used as given (the reference does too): one at or above the row's true lse.
  const double base = std::log(static_cast<double>(classes)) + 4;
  if (n.input("lse").defined())
    in.emplace_back(n.input("lse"),
                    random_array({rows}, DType::f32, Device::cpu(), base, base + 1));
  return in;
}

class NativeCrossEntropyBwd : public NativeGpuCase {};

TEST_P(NativeCrossEntropyBwd, EveryReductionWithAndWithoutTheForwardsLse) {
  EAGLE_SKIP_UNLESS_RUNS_HERE(loss_id());
  for (const char* red : {"none", "sum", "mean"})
    for (bool with_lse : {false, true}) {
      CeCase c;
      c.reduction = red;
      c.label_smoothing = with_lse ? 0.1 : 0.0;
      c.targets = with_lse ? DType::i32 : DType::i64;
      SCOPED_TRACE(std::string(red) + (with_lse ? " with lse" : " without lse"));
      const op::Graph g = ce_bwd_graph(GetParam().dims, GetParam().dtype, c, with_lse);
      sweep::compare_with_reference(manifest(), loss_id(), {}, g, ce_bwd_inputs(g, c));
    }
}

INSTANTIATE_TEST_SUITE_P(native_loss, NativeCrossEntropyBwd,
                         ::testing::ValuesIn(dtype_shapes(row_shapes())), dtype_shape_name);

TEST(NativeLossHarness, TheReferencePassesAgainstItselfBackward) {
  CeCase c;
  c.label_smoothing = 0.2;
  const op::Graph g = ce_bwd_graph({5, 40}, DType::f16, c, true);
  sweep::compare_with_reference(manifest(), engine("loss", "reference"), {}, g,
                                ce_bwd_inputs(g, c));
}

// A plan of two launches and a workspace recorded in a graph: captured on build, and its
// arrays swapped by bind.
TEST(NativeCrossEntropyRecorded, RunsInAGraphAndFollowsBind) {
  EAGLE_SKIP_UNLESS_RUNS_HERE(loss_id());
  CeCase c;
  c.label_smoothing = 0.1;
  op::Graph g("ce_mean");
  const op::Tensor lt = g.tensor({"logits", {300, 1000}, DType::bf16});
  const op::Tensor tt = g.tensor({"targets", {300}, DType::i64});
  g.op("cross_entropy", {{"logits", lt}, {"targets", tt}}, {{"label_smoothing", 0.1}})
      .at("loss")
      .set_output(true)
      .set_name("loss");
  const Kernel k = engines::planned_kernel(g);
  const auto want = [&](const Array& logits, const Array& targets) {
    op::Graph ref = g.clone();
    plan::ExecutionPlans p = plan::ExecutionPlans::create_for(
        ref, manifest(), DeviceProperties::query(Device::cpu()), engine("loss", "reference"), {});
    p.build_plans();
    const Array out = poisoned({}, DType::f32, Device::cpu());
    plan::VariantPack pack(p.layout());
    pack.set(lt.uid(), logits).set(tt.uid(), targets).set(ref.nodes()[0].output("loss"), out);
    p.execute(pack, {});
    return values(out);
  };
  const Device gpu = Device::cuda(0);
  const sweep::HostInputs first = ce_inputs(g, c), second = ce_inputs(g, c);
  Graph graph = Graph::record([&](Recorder& r) {
    r.result(r.call(k, {r.param("logits", first[0].second.to(gpu)),
                        r.param("targets", first[1].second.to(gpu))}));
  });
  graph.build(gpu);
  EXPECT_CLOSE(graph()[0].to_vector<double>(), want(first[0].second, first[1].second), 1e-6);
  graph.bind("logits", second[0].second.to(gpu));
  graph.bind("targets", second[1].second.to(gpu));
  EXPECT_CLOSE(graph()[0].to_vector<double>(), want(second[0].second, second[1].second), 1e-6);
}

// count_not_equal (a mean cross_entropy's backward counts its targets with it): f32 and f64,
// i32 and i64, a value inside and outside the range of x, more elements than the block's threads.
TEST(NativeCountNotEqual, MatchesTheReference) {
  EAGLE_SKIP_UNLESS_RUNS_HERE(loss_id());
  for (DType x_dtype : {DType::i32, DType::i64})
    for (DType y_dtype : {DType::f32, DType::f64})
      for (int64_t value : {int64_t{-100}, int64_t{3}})
        for (int64_t n : {int64_t{1}, int64_t{5000}}) {
          SCOPED_TRACE(std::string(dtype_name(x_dtype)) + " -> " +
                       std::string(dtype_name(y_dtype)) + ", value " + std::to_string(value) +
                       ", " + std::to_string(n) + " elements");
          op::Graph g("count");
          const op::Tensor x = g.tensor({"x", {n}, x_dtype});
          g.op("count_not_equal", {{"x", x}}, {{"value", value}, {"dtype", y_dtype}})
              .at("y")
              .set_output(true)
              .set_name("y");
          const std::vector<int64_t> ids =
              random_targets(static_cast<std::size_t>(n), 8, value, 0.3);
          sweep::compare_with_reference(manifest(), loss_id(), {}, g,
                                        {{x, from_ints(ids, {n}, x_dtype, Device::cpu())}});
        }
}

// ---- CPU: the harness, planning, declines ----

TEST(NativeLossHarness, TheReferencePassesAgainstItself) {
  for (const char* red : {"none", "mean"}) {
    CeCase c;
    c.reduction = red;
    c.label_smoothing = 0.1;
    const op::Graph g = ce_graph({5, 40}, DType::bf16, c);
    sweep::compare_with_reference(manifest(), engine("loss", "reference"), {}, g, ce_inputs(g, c));
  }
}

TEST(NativeLossPlanning, TheNativeEngineLeadsOnAGpuAndAsksForWorkspaceToReduce) {
  EAGLE_SKIP_WITHOUT_CUDA_BUILD();
  for (const char* red : {"none", "sum"}) {
    CeCase c;
    c.reduction = red;
    plan::ExecutionPlans plans = plan::ExecutionPlans::create(
        ce_graph({16384, 32768}, DType::bf16, c), manifest(), hopper());
    ASSERT_GE(plans.count(), 1);
    EXPECT_EQ(plans.at(0).engine_id, loss_id()) << plans.describe();
    EXPECT_EQ(plans.build_plans(), 0);
    EXPECT_EQ(plans.workspace_size(), std::string(red) == "none" ? 0u : 16384u * 4u);
  }
}

TEST(NativeLossPlanning, TheNativeEngineLeadsForCountNotEqualWithoutWorkspace) {
  EAGLE_SKIP_WITHOUT_CUDA_BUILD();
  op::Graph g("count");
  g.op("count_not_equal", {{"x", g.tensor({"x", {4096}, DType::i64})}}, {{"value", -100}})
      .at("y")
      .set_output(true);
  plan::ExecutionPlans plans = plan::ExecutionPlans::create(g, manifest(), hopper());
  ASSERT_GE(plans.count(), 1);
  EXPECT_EQ(plans.at(0).engine_id, loss_id()) << plans.describe();
  EXPECT_EQ(plans.build_plans(), 0);
  EXPECT_EQ(plans.workspace_size(), 0u);
}

TEST(NativeLossPlanning, FewLongRowsSplitIntoChunks) {
  EAGLE_SKIP_WITHOUT_CUDA_BUILD();
  CeCase c;  // mean
  plan::ExecutionPlans plans =
      plan::ExecutionPlans::create(ce_graph({7, 131072}, DType::bf16, c), manifest(), hopper());
  EXPECT_EQ(plans.build_plans(), 0);
  // 7 row losses (rounded up to 8 bytes), then 128 chunks of 1024 a row (a warp each), 3
  // doubles each.
  EXPECT_EQ(plans.workspace_size(), 32u + 7u * 128 * 3 * 8);
}

TEST(NativeLossDeclines, F64LogitsAndUnsignedTargets) {
  sweep::expect_declines(manifest(), loss_id(), ce_graph({4, 8}, DType::f64, {}), hopper(),
                         {"does not serve io dtype f64"});
  CeCase c;
  c.targets = DType::u32;
  sweep::expect_declines(manifest(), loss_id(), ce_graph({4, 8}, DType::f32, c), hopper(),
                         {"targets must be i32 or i64, not u32"});
}

TEST(NativeLossDeclines, StridedLogits) {
  op::Graph g("strided");
  const op::Tensor logits = g.tensor({"logits", {4, 8}, DType::f32, {1, 4}});
  const op::Tensor targets = g.tensor({"targets", {4}, DType::i64});
  g.op("cross_entropy", {{"logits", logits}, {"targets", targets}}).at("loss").set_output(true);
  sweep::expect_declines(manifest(), loss_id(), g, hopper(), {"'logits' must be dense row-major"});
}

}  // namespace
}  // namespace eagle::test::native
