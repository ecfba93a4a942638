// The native fused pointwise engine: a DAG of pointwise nodes with broadcasting inputs, several
// outputs and an intermediate read twice, against the reference engine (GPU; skipped without
// one), and its declines and its place in the plan list (everywhere).
#include <gtest/gtest.h>

#include "cuda_build.hpp"
#include "native_structured.hpp"

namespace eagle::test::native {
namespace {

int64_t fused_id() {
  return engine("pointwise", "native_fused_pointwise");
}

// x [R, C], w [C] (a row broadcast), s [R, 1] (a column broadcast):
//   t = sigmoid(x * w + s); out1 = t * x; out2 = out1 + exp(-(w^2)) + relu(t) - tanh(x * w + s)
op::Graph dag(int64_t rows, int64_t cols, DType d) {
  op::Graph g("dag");
  const op::Tensor x = g.tensor({"x", {rows, cols}, d});
  const op::Tensor w = g.tensor({"w", {cols}, d});
  const op::Tensor s = g.tensor({"s", {rows, 1}, d});
  const op::Tensor pre = g.pointwise("add", g.pointwise("mul", x, w), s);
  const op::Tensor t = g.pointwise("sigmoid", pre);
  op::Tensor out1 = g.pointwise("mul", t, x);
  out1.set_output(true).set_name("out1");
  const op::Tensor bump = g.pointwise("exp", g.pointwise("neg", g.pointwise("square", w)));
  const op::Tensor diff = g.pointwise("sub", g.pointwise("relu", t), g.pointwise("tanh", pre));
  op::Tensor out2 = g.pointwise("add", g.pointwise("add", out1, bump), diff);
  out2.set_output(true).set_name("out2");
  return g;
}

sweep::HostInputs inputs(const op::Graph& g) {
  sweep::HostInputs in;
  for (const op::Tensor& t : g.operand_tensors())
    if (t.producer() < 0) in.emplace_back(t, random_array(t.dims(), t.dtype(), Device::cpu()));
  return in;
}

class NativeFused : public NativeGpuCase {};

// Two units in the last place: each intermediate is rounded to the io dtype from f32 math, and
// one that lands next to a rounding boundary may round the other way than the reference's
// float64 value did; downstream nodes carry that one unit on.
TEST_P(NativeFused, ADagWithBroadcastsMatchesTheReference) {
  EAGLE_SKIP_UNLESS_RUNS_HERE(fused_id());
  const op::Graph g = dag(GetParam().dims[0], GetParam().dims[1], GetParam().dtype);
  sweep::compare_with_reference(manifest(), fused_id(), {}, g, inputs(g), 2);
}

INSTANTIATE_TEST_SUITE_P(native_fused, NativeFused,
                         ::testing::ValuesIn(dtype_shapes(
                             {{3, 5}, {1, 1}, {127, 4099}, {2113, 1031}, {7, 8}, {129, 4096}})),
                         dtype_shape_name);

// The vector path (innermost dim a multiple of 8) with every operand one element off 16-byte
// alignment: the kernel falls back to one element per thread and computes the same.
TEST_P(NativeFused, UnalignedOperandsMatchTheReference) {
  EAGLE_SKIP_UNLESS_RUNS_HERE(fused_id());
  const op::Graph g = dag(GetParam().dims[0], GetParam().dims[1], GetParam().dtype);
  sweep::compare_with_reference(manifest(), fused_id(), {}, g, inputs(g), 2, /*offset=*/1);
}

// x f32 [R, C], y bf16 [C], flag boolean [R, 1]: comparisons, logic, where and casts, outputs
// of three dtypes:
//   m = x < cast(y, f32); z = where(m, x, sin(x)); n = m and flag; zb = cast(z, bf16)
op::Graph mixed(int64_t rows, int64_t cols) {
  op::Graph g("mixed");
  const op::Tensor x = g.tensor({"x", {rows, cols}, DType::f32});
  const op::Tensor y = g.tensor({"y", {cols}, DType::bf16});
  const op::Tensor flag = g.tensor({"flag", {rows, 1}, DType::boolean});
  const op::Tensor m = g.pointwise("cmp_lt", x, g.pointwise("cast", y, {{"dtype", DType::f32}}));
  op::Tensor z = g.where(m, x, g.pointwise("sin", x));
  z.set_output(true).set_name("z");
  g.pointwise("logical_and", m, flag).set_output(true).set_name("n");
  g.pointwise("cast", z, {{"dtype", DType::bf16}}).set_output(true).set_name("zb");
  return g;
}

// Two units in the last place: as the DAG above.
TEST(NativeFusedMixed, ComparisonsLogicWhereAndCastsMatchTheReference) {
  EAGLE_SKIP_UNLESS_RUNS_HERE(fused_id());
  for (const op::Dims& d : {op::Dims{3, 5}, op::Dims{127, 4099}, op::Dims{33, 1032}}) {
    SCOPED_TRACE(dims_name(d));
    const op::Graph g = mixed(d[0], d[1]);
    sweep::compare_with_reference(manifest(), fused_id(), {}, g, inputs(g), 2);
  }
}

// A reduction's derivative broadcasts its cotangent to x's shape as where(x, g, g): the kernel
// copies g and never loads x (poisoned here; whatever it holds, the result is g). Odd and vector
// shapes, f32 and bf16.
TEST(NativeFusedMixed, AWhereOfOneValueTwiceIsThatValue) {
  EAGLE_SKIP_UNLESS_RUNS_HERE(fused_id());
  for (DType d : {DType::f32, DType::bf16})
    for (const op::Dims& dims : {op::Dims{3, 5}, op::Dims{129, 4096}}) {
      SCOPED_TRACE(dims_name(dims));
      op::Graph g("expand");
      const op::Tensor like = g.tensor({"like", dims, d});
      const op::Tensor cot = g.tensor({"cot", {}, d});
      g.where(like, cot, cot).set_output(true).set_name("y");
      sweep::HostInputs in = inputs(g);
      poison(in[0].second);
      sweep::compare_with_reference(manifest(), fused_id(), {}, g, in, 0);
    }
}

// Every input read is one element (a mean loss's cotangent scaled, say): each output is one
// value throughout, two outputs of two dtypes, through a chain of ops on the scalars, x unread.
//   y = where(x, c * s, c * s) (x's dtype); e = where(x, exp(-(c * s)), the same) (f32)
TEST(NativeFusedMixed, AProgramOfScalarsAloneFillsEachOutputWithItsValue) {
  EAGLE_SKIP_UNLESS_RUNS_HERE(fused_id());
  for (DType d : {DType::f16, DType::bf16, DType::f32})
    for (const op::Dims& dims : {op::Dims{5, 3}, op::Dims{257, 1024}}) {
      SCOPED_TRACE(dims_name(dims));
      op::Graph g("scalars");
      const op::Tensor x = g.tensor({"x", dims, d});
      const op::Tensor c = g.tensor({"c", {}, DType::f32});
      const op::Tensor sc = g.tensor({"s", {1, 1}, DType::f32});
      const op::Tensor cs = g.pointwise("cast", g.pointwise("mul", c, sc), {{"dtype", d}});
      g.where(x, cs, cs).set_output(true).set_name("y");
      const op::Tensor e = g.pointwise("exp", g.pointwise("neg", g.pointwise("mul", c, sc)));
      g.where(x, e, e).set_output(true).set_name("e");
      sweep::HostInputs in = inputs(g);
      poison(in[0].second);
      sweep::compare_with_reference(manifest(), fused_id(), {}, g, in, 1);
    }
}

// A u8 mask [R, 1] read as a condition and as a number (the training job's `active` rows):
//   y = where(mask, x, 0.5) * mask + x
op::Graph masked(int64_t rows, int64_t cols) {
  op::Graph g("masked");
  const op::Tensor x = g.tensor({"x", {rows, cols}, DType::bf16});
  const op::Tensor mask = g.tensor({"mask", {rows, 1}, DType::u8});
  const op::Tensor half = g.tensor({"half", {1}, DType::bf16});
  const op::Tensor picked = g.where(mask, x, half);
  g.pointwise("add", g.pointwise("mul", picked, mask), x).set_output(true).set_name("y");
  return g;
}

TEST(NativeFusedMixed, AU8MaskInputMatchesTheReference) {
  EAGLE_SKIP_UNLESS_RUNS_HERE(fused_id());
  for (const op::Dims& d : {op::Dims{3, 5}, op::Dims{257, 1031}, op::Dims{65, 4104}}) {
    SCOPED_TRACE(dims_name(d));
    const op::Graph g = masked(d[0], d[1]);
    sweep::compare_with_reference(manifest(), fused_id(), {}, g, inputs(g), 2);
  }
}

// Byte tensors read in full, not broadcast (the vector path's 8-byte loads and stores):
//   y = where(b, x * m, x) (f16), nb = not b (boolean)
op::Graph full_masks(int64_t rows, int64_t cols) {
  op::Graph g("full_masks");
  const op::Tensor x = g.tensor({"x", {rows, cols}, DType::f16});
  const op::Tensor m = g.tensor({"m", {rows, cols}, DType::u8});
  const op::Tensor b = g.tensor({"b", {rows, cols}, DType::boolean});
  g.where(b, g.pointwise("mul", x, m), x).set_output(true).set_name("y");
  g.pointwise("logical_not", b).set_output(true).set_name("nb");
  return g;
}

TEST(NativeFusedMixed, FullByteMasksMatchTheReference) {
  EAGLE_SKIP_UNLESS_RUNS_HERE(fused_id());
  for (const op::Dims& d : {op::Dims{3, 5}, op::Dims{33, 1032}}) {
    SCOPED_TRACE(dims_name(d));
    const op::Graph g = full_masks(d[0], d[1]);
    sweep::compare_with_reference(manifest(), fused_id(), {}, g, inputs(g), 2);
  }
}

TEST(NativeFusedPlanning, OpsOnlyTheFusedEngineServesPlanThere) {
  EAGLE_SKIP_WITHOUT_CUDA_BUILD();
  op::Graph g("cmp");
  const op::Tensor a = g.tensor({"a", {4, 8}, DType::f16}), b = g.tensor({"b", {8}, DType::f16});
  g.pointwise("cmp_ge", a, b).set_output(true);
  plan::ExecutionPlans plans = plan::ExecutionPlans::create(g, manifest(), hopper());
  EXPECT_EQ(plans.at(plans.build_plans()).engine_id, fused_id()) << plans.describe();
  plan::ExecutionPlans many = plan::ExecutionPlans::create(mixed(4, 8), manifest(), hopper());
  EXPECT_EQ(many.at(many.build_plans()).engine_id, fused_id()) << many.describe();
}

TEST(NativeFusedHarness, TheReferencePassesAgainstItself) {
  const op::Graph m = masked(7, 33);
  sweep::compare_with_reference(manifest(), engine("pointwise", "reference"), {}, m, inputs(m));
  const op::Graph g = dag(7, 33, DType::bf16);
  sweep::compare_with_reference(manifest(), engine("pointwise", "reference"), {}, g, inputs(g));
  const op::Graph h = mixed(7, 33);
  sweep::compare_with_reference(manifest(), engine("pointwise", "reference"), {}, h, inputs(h));
}

TEST(NativeFusedPlanning, ItLeadsForSeveralNodesAndFollowsTheOneOpKernelsForOne) {
  const plan::ExecutionPlans many =
      plan::ExecutionPlans::create(dag(4, 8, DType::f16), manifest(), hopper());
  ASSERT_GE(many.count(), 1);
  EXPECT_EQ(many.at(0).engine_id, fused_id()) << many.describe();
  for (int i = 0; i < many.count(); ++i)
    EXPECT_NE(many.at(i).engine_id, engine("pointwise", "native_pointwise"));

  op::Graph one("one");
  const op::Tensor a = one.tensor({"a", {4, 8}, DType::f32});
  one.pointwise("exp", a).set_output(true);
  plan::ExecutionPlans single = plan::ExecutionPlans::create(one, manifest(), hopper());
  EXPECT_EQ(single.at(0).engine_id, engine("pointwise", "native_pointwise")) << single.describe();
  bool listed = false;
  for (int i = 0; i < single.count(); ++i) listed |= single.at(i).engine_id == fused_id();
  EXPECT_TRUE(listed) << single.describe();
}

TEST(NativeFusedPlanning, ABroadcastingSingleNodeFallsToTheFusedEngine) {
  EAGLE_SKIP_WITHOUT_CUDA_BUILD();
  op::Graph g("broadcast");
  const op::Tensor a = g.tensor({"a", {4, 8}, DType::bf16}), b = g.tensor({"b", {8}, DType::bf16});
  g.pointwise("add", a, b).set_output(true);
  plan::ExecutionPlans plans = plan::ExecutionPlans::create(g, manifest(), hopper());
  EXPECT_EQ(plans.at(plans.build_plans()).engine_id, fused_id()) << plans.describe();
}

TEST(NativeFusedDeclines, IntegerTensorsAndNarrowOutputs) {
  {
    op::Graph g("integers");  // f32 registers would not hold every i32 exactly
    const op::Tensor a = g.tensor({"a", {4, 8}, DType::i32});
    g.pointwise("neg", g.pointwise("abs", a)).set_output(true);
    sweep::expect_declines(manifest(), fused_id(), g, hopper(), {"tensor 'a' is i32"});
  }
  {
    op::Graph g("narrow");
    const op::Tensor a = g.tensor({"a", {4, 8}, DType::f32}), b = g.tensor({"b", {8}, DType::f32});
    g.pointwise("exp", b).set_output(true).set_name("eb");
    g.pointwise("add", a, b).set_output(true);
    sweep::expect_declines(manifest(), fused_id(), g, hopper(),
                           {"output 'eb' must have the full broadcast shape"});
  }
  {
    op::Graph g("virtual");
    const op::Tensor a = g.tensor({"a", {4, 8}, DType::f32});
    g.pointwise("exp", g.pointwise("neg", a));
    sweep::expect_declines(manifest(), fused_id(), g, hopper(), {"outputs the caller receives"});
  }
  {
    op::Graph g("u8 out");  // u8 is read, never written: a cast would need the reference's rounding
    const op::Tensor a = g.tensor({"a", {4, 8}, DType::f32});
    g.pointwise("cast", a, {{"dtype", DType::u8}}).set_output(true);
    sweep::expect_declines(manifest(), fused_id(), g, hopper(),
                           {"is u8: the kernel reads u8 inputs, it writes none"});
  }
}

}  // namespace
}  // namespace eagle::test::native
