// The derivative of a planned operation (src/engines/planned_derivative.cpp) inside whole
// recorded graphs, differentiated by diff::reverse and diff::gradients on the CPU against
// float64 central finite differences of the forward graph itself (params rebound), on fresh
// random inputs: an MLP with cross entropy, a softmax / rms_norm chain followed by ordinary
// kernels, sdpa and gdn on small ragged batches (both with NaN padding rows), a saved input the
// forward overwrites after the planned call; and the refusal of an op without a rule.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>

#include "eagle/eagle.hpp"
#include "eagle/engines/planned_kernel.hpp"
#include "random.hpp"
#include "test_util.hpp"

namespace eagle {
namespace {

using op::Tensor;
const Device cpu = Device::cpu();
constexpr DType f64 = DType::f64;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// d objective(results) / d param, by central differences of the built graph (param rebound),
// at the elements `active` selects (all when empty; the others are NaN).
std::vector<double> finite_difference(
    Graph& g, const std::string& param, const Array& at,
    const std::function<double(const std::vector<Array>&)>& objective,
    const std::vector<bool>& active = {}) {
  std::vector<double> x = at.to_vector<double>(), grad(x.size(), kNaN);
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (!active.empty() && !active[i]) continue;
    const double h = 1e-6 * std::max(1.0, std::abs(x[i]));
    std::vector<double> p = x, m = x;
    p[i] += h;
    m[i] -= h;
    g.bind(param, Array::from(p, at.shape(), cpu));
    const double fp = objective(g());
    g.bind(param, Array::from(m, at.shape(), cpu));
    const double fm = objective(g());
    grad[i] = (fp - fm) / (2 * h);
  }
  g.bind(param, at);
  return grad;
}

double first(const std::vector<Array>& results) {
  return results[0].to_vector<double>()[0];
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want,
                  double tol = 1e-5) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) continue;  // not compared (padding)
    EXPECT_TRUE(std::isfinite(got[i])) << "element " << i;
    EXPECT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << "element " << i;
  }
}

// Planning with matmul epilogues (PlanningOptions::fuse_epilogues).
engines::PlanningOptions with_epilogues() {
  engines::PlanningOptions o;
  o.fuse_epilogues = true;
  return o;
}

// One graph: the loss `forward` records and its gradients with respect to the values it
// returns beside it, in one launch.
template <class Forward>
Graph loss_and_gradients(const Forward& forward) {
  return Graph::record(
      [&](Recorder& r) {
        auto [loss, wrt] = forward(r);
        std::vector<Value> out = {loss};
        for (const Value& g : diff::gradients(r, {loss}, wrt)) out.push_back(g);
        r.result(out);
      },
      RecordOptions{.record = true});
}

// Records planned_segments' calls in order; `v` maps uids to values, the outputs added.
void call_segments(Recorder& r, const std::vector<engines::PlannedSegment>& segs,
                   std::map<int64_t, Value>& v) {
  for (const engines::PlannedSegment& seg : segs) {
    std::vector<Arg> args;
    for (int64_t uid : seg.inputs) args.emplace_back(v.at(uid));
    const std::vector<Value> out = r.call_all(seg.kernel, args);
    for (std::size_t i = 0; i < out.size(); ++i) v.insert_or_assign(seg.outputs[i], out[i]);
  }
}

// loss = cross_entropy(gelu(x w1 + b1) w2, targets), mean over rows.
op::Graph mlp_graph() {
  op::Graph g("mlp");
  const Tensor x = g.tensor({"x", {4, 3}, f64});
  const Tensor w1 = g.tensor({"w1", {3, 5}, f64});
  const Tensor b1 = g.tensor({"b1", {5}, f64});
  const Tensor w2 = g.tensor({"w2", {5, 6}, f64});
  const Tensor targets = g.tensor({"targets", {4}, DType::i64});
  const Tensor logits = g.matmul(g.pointwise("gelu", g.matmul(x, w1, b1)), w2);
  g.op("cross_entropy", {{"logits", logits}, {"targets", targets}})
      .at("loss")
      .set_output(true)
      .set_name("loss");
  return g;
}

// The MLP's gradients by reverse and in one graph against finite differences, for `mlp` made
// from mlp_graph() with some PlanningOptions.
void check_mlp_gradients(const Kernel& mlp) {
  const std::vector<std::string> names = {"x", "w1", "b1", "w2"};
  const std::vector<Array> init = {
      test::random_array({4, 3}, f64, cpu), test::random_array({3, 5}, f64, cpu),
      test::random_array({5}, f64, cpu), test::random_array({5, 6}, f64, cpu)};
  const Array targets = Array::from(std::vector<int64_t>{1, 5, 0, 3}, {4}, cpu);
  auto forward = [&](Recorder& r) {
    std::vector<Arg> args;
    std::vector<Value> wrt;
    for (std::size_t i = 0; i < names.size(); ++i) {
      wrt.push_back(r.param(names[i], init[i]));
      args.emplace_back(wrt.back());
    }
    args.emplace_back(r.param("targets", targets));
    return std::make_pair(r.call(mlp, args), wrt);
  };
  Graph f = Graph::record([&](Recorder& r) { r.result(forward(r).first); },
                          RecordOptions{.record = true});
  f.build(cpu);
  Graph back = diff::reverse(f, {"result"}, names);
  f();
  const std::vector<Array> grads = back();
  Graph step = loss_and_gradients(forward);
  step.build(cpu);
  const std::vector<Array> one = step();
  for (std::size_t i = 0; i < names.size(); ++i) {
    SCOPED_TRACE(names[i]);
    const std::vector<double> want = finite_difference(f, names[i], init[i], first);
    expect_close(grads[i].to_vector<double>(), want);
    expect_close(one[i + 1].to_vector<double>(), want);
  }
}

TEST(PlannedDerivative, AnMlpWithCrossEntropyByReverseAndInOneGraph) {
  check_mlp_gradients(engines::planned_kernel(mlp_graph()));
}

// Autotune plans the forward's kernel and each kernel of its derivative by timing.
TEST(PlannedDerivative, AnAutotunedMlpDifferentiatesAlike) {
  check_mlp_gradients(engines::planned_kernel(
      mlp_graph(), engines::PlanningOptions{{plan::HeurMode::A}, plan::AutotuneOptions{}, false}));
}

// The README's training step: an f32 MLP whose weights one graph updates at each launch.
TEST(PlannedDerivative, ATrainingStepWithAPlannedMlpIsOneGraph) {
  op::Graph og("mlp");
  Tensor x = og.tensor({"x", {16, 8}, DType::f32}), w1 = og.tensor({"w1", {8, 32}, DType::f32});
  Tensor w2 = og.tensor({"w2", {32, 4}, DType::f32}), t = og.tensor({"t", {16}, DType::i64});
  Tensor logits = og.matmul(og.pointwise("gelu", og.matmul(x, w1)), w2);
  og.op("cross_entropy", {{"logits", logits}, {"targets", t}}).at("loss").set_output(true);
  const Kernel mlp = engines::planned_kernel(og);
  const Array x0 = test::random_array({16, 8}, DType::f32, cpu);
  const Array t0 = Array::from(test::random_ints(16, 0, 3), {16}, cpu);  // class ids in [0, 4)
  const Array w1_array = test::random_array({8, 32}, DType::f32, cpu, -0.5, 0.5);
  const Array w2_array = test::random_array({32, 4}, DType::f32, cpu, -0.5, 0.5);
  Graph step = Graph::record(
      [&](Recorder& r) {
        Value wv1 = r.external(w1_array, "w1"), wv2 = r.external(w2_array, "w2");
        Value loss = r.call(mlp, {r.param("x", x0), wv1, wv2, r.param("t", t0)});
        std::vector<Value> g = diff::gradients(r, {loss}, {wv1, wv2});
        r.call(kernels::axpy(), {g[0], wv1, -0.1}, buffer(wv1));
        r.call(kernels::axpy(), {g[1], wv2, -0.1}, buffer(wv2));
        r.result(loss);
      },
      RecordOptions{.record = true});
  step.build(cpu);
  const double first_loss = step()[0].to_vector<double>()[0];
  step(100);
  const double last_loss = step()[0].to_vector<double>()[0];
  EXPECT_LT(last_loss, 0.9 * first_loss) << "first " << first_loss << ", last " << last_loss;
}

// y = gelu(x w1) w2 cut by planned_segments with epilogues ([matmul, gelu], [matmul]); loss =
// sum(y), plus
// sum(h) of the hidden h = gelu(x w1) with `hidden_in_loss`. The nodes of the recorded step and
// its gradients against finite differences.
struct SegmentedMlp {
  bool hidden_in_loss;
  std::vector<NodeInfo> nodes;
  void check() {
    op::Graph og("mlp2");
    const Tensor x = og.tensor({"x", {6, 4}, f64}), w1 = og.tensor({"w1", {4, 5}, f64});
    const Tensor w2 = og.tensor({"w2", {5, 3}, f64});
    const Tensor h = og.pointwise("gelu", og.matmul(x, w1));
    Tensor y = og.matmul(h, w2);
    y.set_output(true).set_name("y");
    const std::vector<engines::PlannedSegment> segs =
        engines::planned_segments(og, with_epilogues());
    ASSERT_EQ(segs.size(), 2u);
    const std::vector<std::string> names = {"x", "w1", "w2"};
    const std::vector<Array> init = {test::random_array({6, 4}, f64, cpu),
                                     test::random_array({4, 5}, f64, cpu),
                                     test::random_array({5, 3}, f64, cpu)};
    auto forward = [&](Recorder& r) {
      std::vector<Value> wrt;
      std::map<int64_t, Value> v;
      for (std::size_t i = 0; i < names.size(); ++i) wrt.push_back(r.param(names[i], init[i]));
      v = {{x.uid(), wrt[0]}, {w1.uid(), wrt[1]}, {w2.uid(), wrt[2]}};
      call_segments(r, segs, v);
      Value loss = r.call(kernels::sum(), {v.at(y.uid())});
      if (hidden_in_loss)
        loss = r.call(kernels::add(), {loss, r.call(kernels::sum(), {v.at(h.uid())})});
      return std::make_pair(loss, wrt);
    };
    Graph f = Graph::record([&](Recorder& r) { r.result(forward(r).first); });
    f.build(cpu);
    Graph step = loss_and_gradients(forward);
    nodes = step.nodes();
    step.build(cpu);
    const std::vector<Array> got = step();
    for (std::size_t i = 0; i < names.size(); ++i) {
      SCOPED_TRACE(names[i]);
      expect_close(got[i + 1].to_vector<double>(), finite_difference(f, names[i], init[i], first));
    }
  }
  // The node of a kernel fusing a taken-over matmul with the pointwise node after it: it reads
  // the matmul's operands (taken.a, taken.b) and writes more than the matmul's product.
  bool fused() const {
    for (const NodeInfo& n : nodes)
      for (const NodeArgInfo& a : n.arrays)
        if (a.param == "taken.a" && n.arrays.size() > 3) return true;
    return false;
  }
};

// The reverse of [matmul, gelu] <- [matmul]: the second segment's backward defers its dx
// matmul; the first's backward starts with gelu_backward reading it, takes it over and runs the
// two as one kernel (the matmul's epilogue).
TEST(PlannedDerivative, ADeferredMatmulFusesIntoTheNextBackwardsFirstKernel) {
  SegmentedMlp m{false, {}};
  m.check();
  EXPECT_TRUE(m.fused());
}

// The hidden layer's cotangent also gets sum(h)'s: the contributions are added, which records
// the deferred matmul first; nothing is taken over and the gradients are the same.
TEST(PlannedDerivative, ADeferredMatmulThatIsReadElsewhereIsRecorded) {
  SegmentedMlp m{true, {}};
  m.check();
  EXPECT_FALSE(m.fused());
}

// y = gelu(gelu(x w1) w2) w3 cut by planned_segments with epilogues, seeded with ones, on cuda:0
// in bf16 (cuDNN runs the epilogues fused, forward and backward) and f32 (no engine fuses: each
// epilogue segment runs its pieces, a backward one passing the virtual product through its
// workspace), against the same graph on the CPU in float64 from the same (rounded) inputs.
class FusedBackwardOnGpu : public ::testing::TestWithParam<DType> {};

TEST_P(FusedBackwardOnGpu, MatchesTheCpu) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const DType dt = GetParam();
  const int64_t t = 64, d0 = 32, d1 = 48, d2 = 40, d3 = 16;
  const std::vector<Shape> shapes = {{t, d0}, {d0, d1}, {d1, d2}, {d2, d3}};
  std::vector<std::vector<double>> init;  // x, w1, w2, w3, rounded to dt
  for (const Shape& sh : shapes)
    init.push_back(test::random_array(sh, dt, cpu).to_vector<double>());
  auto gradients = [&](Device dev, DType type, std::vector<NodeInfo>* nodes) {
    op::Graph og("mlp3");
    std::vector<Tensor> ts;
    for (std::size_t i = 0; i < shapes.size(); ++i)
      ts.push_back(og.tensor({i ? "w" + std::to_string(i) : "x", shapes[i], type}));
    Tensor y = og.matmul(
        og.pointwise("gelu", og.matmul(og.pointwise("gelu", og.matmul(ts[0], ts[1])), ts[2])),
        ts[3]);
    y.set_output(true).set_name("y");
    const std::vector<engines::PlannedSegment> segs =
        engines::planned_segments(og, with_epilogues());
    Graph step = Graph::record(
        [&](Recorder& r) {
          std::map<int64_t, Value> v;
          std::vector<Value> weights;
          for (std::size_t i = 0; i < ts.size(); ++i) {
            v[ts[i].uid()] =
                r.param(ts[i].name(), test::from_doubles(init[i], shapes[i], type, dev));
            if (i) weights.push_back(v[ts[i].uid()]);
          }
          call_segments(r, segs, v);
          r.result(diff::gradients(r, {v.at(y.uid())}, weights));
        },
        RecordOptions{.record = true});
    if (nodes) *nodes = step.nodes();
    step.build(dev);
    std::vector<std::vector<double>> out;
    for (const Array& g : step()) out.push_back(g.to(cpu).to_vector<double>());
    return out;
  };
  std::vector<NodeInfo> nodes;
  const auto want = gradients(cpu, f64, nullptr);
  const auto got = gradients(Device::cuda(0), dt, &nodes);
  const double tol = dt == DType::bf16 ? 3e-2 : 1e-4;
  for (std::size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE("w" + std::to_string(i + 1));
    EXPECT_CLOSE(got[i], want[i], tol);
  }
  int taken = 0;  // backward kernels fusing a taken-over matmul: one per gelu layer
  for (const NodeInfo& n : nodes)
    for (const NodeArgInfo& a : n.arrays) taken += a.param == "taken.a" && n.arrays.size() > 3;
  EXPECT_EQ(taken, 2);
}

INSTANTIATE_TEST_SUITE_P(PlannedDerivative, FusedBackwardOnGpu,
                         ::testing::Values(DType::bf16, DType::f32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// y = softmax(rms_norm(x, scale)) by a planned op; loss = sum(y * c) by ordinary kernels.
TEST(PlannedDerivative, ASoftmaxRmsNormChainBetweenOrdinaryKernels) {
  op::Graph og("norm_softmax");
  const Tensor x = og.tensor({"x", {3, 5}, f64});
  const Tensor scale = og.tensor({"scale", {5}, f64});
  const Tensor n = og.op("rms_norm", {{"x", x}, {"scale", scale}}, {{"epsilon", 1e-3}}).at("y");
  og.op("softmax", {{"x", n}}).at("y").set_output(true).set_name("y");
  const Kernel k = engines::planned_kernel(og);
  const Array x0 = test::random_array({3, 5}, f64, cpu, -2, 2);
  const Array s0 = test::random_array({5}, f64, cpu, 0.5, 2);
  const Array c0 = test::random_array({3, 5}, f64, cpu);
  // The loss, and (one_graph) its gradients recorded into the same graph.
  auto record = [&](bool one_graph) {
    return Graph::record(
        [&](Recorder& r) {
          const Value x = r.param("x", x0), s = r.param("scale", s0);
          const Value xv = r.call(kernels::scale(), {x, 1.5});  // read twice
          const Value y = r.call(k, {xv, s});
          const Value z = r.call(kernels::add(), {r.call(kernels::mul(), {y, r.param("c", c0)}),
                                                  r.call(kernels::mul(), {xv, xv})});
          const Value loss = r.call(kernels::sum(), {z});
          std::vector<Value> out = {loss};
          if (one_graph)
            for (const Value& g : diff::gradients(r, {loss}, {x, s})) out.push_back(g);
          r.result(out);
        },
        RecordOptions{.record = true});
  };
  Graph f = record(false);
  f.build(cpu);
  Graph back = diff::reverse(f, {"result"}, {"x", "scale"});
  f();
  const std::vector<Array> grads = back();
  Graph step = record(true);
  step.build(cpu);
  const std::vector<Array> one = step();
  const std::vector<double> dx = finite_difference(f, "x", x0, first);
  const std::vector<double> ds = finite_difference(f, "scale", s0, first);
  expect_close(grads[0].to_vector<double>(), dx);
  expect_close(grads[1].to_vector<double>(), ds);
  expect_close(one[1].to_vector<double>(), dx);
  expect_close(one[2].to_vector<double>(), ds);
}

// The forward overwrites the planned call's input afterwards: the reverse reads the saved copy.
TEST(PlannedDerivative, AnInputOverwrittenAfterThePlannedCallIsSaved) {
  op::Graph og("exp_mul");
  const Tensor a = og.tensor({"a", {4}, f64});
  const Tensor b = og.tensor({"b", {4}, f64});
  og.pointwise("mul", og.pointwise("exp", a), b).set_output(true).set_name("y");
  const Kernel k = engines::planned_kernel(og);
  const Array x0 = test::random_array({4}, f64, cpu);
  const Array w0 = test::random_array({4}, f64, cpu);
  Graph f = Graph::record(
      [&](Recorder& r) {
        const Value h = r.empty({4}, f64, "h");
        r.call(kernels::copy(), {r.param("x", x0)}, buffer(h));
        const Value y = r.call(k, {h, r.param("w", w0)});
        r.call(kernels::scale(), {h, 3.0}, buffer(h));  // h overwritten in place
        r.result(r.call(kernels::sum(), {r.call(kernels::mul(), {y, h})}));
      },
      RecordOptions{.record = true});
  f.build(cpu);
  EXPECT_GT(f.saved_bytes(), 0u);
  Graph back = diff::reverse(f, {"result"}, {"x", "w"});
  f();
  const std::vector<Array> grads = back();
  expect_close(grads[0].to_vector<double>(), finite_difference(f, "x", x0, first));
  expect_close(grads[1].to_vector<double>(), finite_difference(f, "w", w0, first));
}

// What the derivative reads (and a forward therefore saves when it overwrites it): softmax's
// backward reads its output only; the mul's both inputs; the exp's output.
TEST(PlannedDerivative, ItReadsOnlyTheOperandsItsBackwardReads) {
  op::Graph og("reads");
  const Tensor x = og.tensor({"x", {2, 3}, f64});
  const Tensor a = og.tensor({"a", {2, 3}, f64});
  const Tensor b = og.tensor({"b", {2, 3}, f64});
  og.op("softmax", {{"x", x}}).at("y").set_output(true).set_name("y");
  og.pointwise("exp", og.pointwise("mul", a, b)).set_output(true).set_name("z");
  const Kernel k = engines::planned_kernel(og);
  const VjpRule* rule = derivative_of(k);
  ASSERT_NE(rule, nullptr);
  std::vector<std::string> read;
  for (std::size_t i = 0; i < k.def().arrays.size(); ++i)
    if (rule->reads(static_cast<int>(i))) read.push_back(k.def().arrays[i].name);
  EXPECT_EQ(read, (std::vector<std::string>{"a", "b", "y", "z"}));
}

// Random values of `shape` in [lo, hi) with the rows `padding` (along dim 0) NaN; which elements
// are active.
std::pair<Array, std::vector<bool>> padded(const Shape& shape, const std::vector<int64_t>& padding,
                                           double lo = -1.0, double hi = 1.0) {
  std::vector<double> v = test::random_values(static_cast<std::size_t>(test::numel(shape)), lo, hi);
  std::vector<bool> active(v.size(), true);
  const int64_t row = test::numel(shape) / shape[0];
  for (int64_t p : padding)
    for (int64_t i = p * row; i < (p + 1) * row; ++i) {
      v[static_cast<std::size_t>(i)] = kNaN;
      active[static_cast<std::size_t>(i)] = false;
    }
  return {Array::from(v, shape, cpu), active};
}

// sum of c * o over the finite entries of c.
std::function<double(const std::vector<Array>&)> dot_with(const Array& c) {
  return [cv = c.to_vector<double>()](const std::vector<Array>& results) {
    const std::vector<double> o = results[0].to_vector<double>();
    double l = 0;
    for (std::size_t i = 0; i < cv.size(); ++i)
      if (std::isfinite(cv[i])) l += cv[i] * o[i];
    return l;
  };
}

TEST(PlannedDerivative, SdpaOnARaggedBatchWithNaNPaddingRows) {
  // q rows: sequences [0, 2) and [2, 5), row 5 padding; kv rows [0, 3), [3, 6), row 6 padding.
  op::Graph og("attention");
  const Tensor q = og.tensor({"q", {6, 2, 4}, f64});
  const Tensor k = og.tensor({"k", {7, 1, 4}, f64});
  const Tensor v = og.tensor({"v", {7, 1, 3}, f64});
  const Tensor cq = og.tensor({"cu_q", {3}, DType::i64});
  const Tensor ckv = og.tensor({"cu_kv", {3}, DType::i64});
  og.op("sdpa", {{"q", q}, {"k", k}, {"v", v}, {"cu_seqlens_q", cq}, {"cu_seqlens_kv", ckv}},
        {{"causal", true}})
      .at("o")
      .set_output(true)
      .set_name("o");
  const Kernel attention = engines::planned_kernel(og);
  const auto [q0, q_active] = padded({6, 2, 4}, {5});
  const auto [k0, k_active] = padded({7, 1, 4}, {6});
  const auto [v0, v_active] = padded({7, 1, 3}, {6});
  const auto [c0, c_active] = padded({6, 2, 3}, {5});  // the cotangent's padding row is NaN
  Graph f = Graph::record(
      [&](Recorder& r) {
        r.result(r.call(attention,
                        {r.param("q", q0), r.param("k", k0), r.param("v", v0),
                         r.param("cu_q", Array::from(std::vector<int64_t>{0, 2, 5}, {3}, cpu)),
                         r.param("cu_kv", Array::from(std::vector<int64_t>{0, 3, 6}, {3}, cpu))}));
      },
      RecordOptions{.record = true});
  f.build(cpu);
  Graph back = diff::reverse(f, {diff::Seed("result", c0)}, {"q", "k", "v"});
  f();
  const std::vector<Array> grads = back();
  const auto objective = dot_with(c0);
  expect_close(grads[0].to_vector<double>(), finite_difference(f, "q", q0, objective, q_active));
  expect_close(grads[1].to_vector<double>(), finite_difference(f, "k", k0, objective, k_active));
  expect_close(grads[2].to_vector<double>(), finite_difference(f, "v", v0, objective, v_active));
}

// Causal sdpa over q, k and v read as column slices [6, 2, 4] of one packed [6, width] array
// (param "qkv", 4-column head blocks: q, k, v the first six; NaN in padding row 5), recorded
// for the reverse pass; `qkv0` and `active` its data and active mask, `c0` the cotangent.
struct PackedSdpa {
  Array qkv0, c0;
  std::vector<bool> active;
  Graph forward;
};
PackedSdpa packed_sdpa(int64_t width) {
  op::Graph og("attention");
  const op::Dims packed = {width, 4, 1};
  const Tensor q = og.tensor({"q", {6, 2, 4}, f64, packed});
  const Tensor k = og.tensor({"k", {6, 2, 4}, f64, packed});
  const Tensor v = og.tensor({"v", {6, 2, 4}, f64, packed});
  const Tensor cu = og.tensor({"cu", {3}, DType::i64});
  og.op("sdpa", {{"q", q}, {"k", k}, {"v", v}, {"cu_seqlens_q", cu}, {"cu_seqlens_kv", cu}},
        {{"causal", true}})
      .at("o")
      .set_output(true)
      .set_name("o");
  const Kernel attention = engines::planned_kernel(og);
  auto [qkv0, active] = padded({6, width}, {5});
  Array c0 = padded({6, 2, 4}, {5}).first;
  Graph f = Graph::record(
      [&](Recorder& r) {
        const Value heads = r.param("qkv", qkv0).reshape({6, width / 4, 4});
        r.result(r.call(attention,
                        {heads.slice(1, 0, 2), heads.slice(1, 2, 4), heads.slice(1, 4, 6),
                         r.param("cu", Array::from(std::vector<int64_t>{0, 2, 5}, {3}, cpu))}));
      },
      RecordOptions{.record = true});
  f.build(cpu);
  return {qkv0, c0, active, std::move(f)};
}

// q, k and v as column slices of one packed [T, 3 H D] array (one qkv projection's output):
// sdpa_bwd writes dq, dk and dv in that layout too (a fused backward reads and writes each pair
// alike), into one array shaped as the packed one, which the reverse pass takes as the packed
// array's cotangent; right against finite differences (padding row NaN).
TEST(PlannedDerivative, SdpaOverPackedQkvSlicesWritesItsGradientsInTheirLayout) {
  PackedSdpa s = packed_sdpa(24);  // [6, 2, 4] views of [6, 24]: tokens 3 * 2 * 4 apart
  Graph back = diff::reverse(s.forward, {diff::Seed("result", s.c0)}, {"qkv"});
  bool laid_out = false;  // the backward's dq: a [6, 2, 4] view of a [6, 24] array
  for (const NodeInfo& n : back.nodes())
    for (const NodeArgInfo& a : n.arrays)
      if (a.param == "grad.q" && a.strides == Shape{24, 4, 1})
        laid_out =
            back.recording().buffers()[static_cast<std::size_t>(a.buffer)].shape == Shape{6, 24};
  EXPECT_TRUE(laid_out);
  // That array is the packed array's cotangent as it is: nothing gathered or scattered, and
  // nothing zero-filled first (dq, dk and dv cover it).
  for (const NodeInfo& n : back.nodes()) {
    EXPECT_NE(n.kernel, "gather_view");
    EXPECT_NE(n.kernel, "scatter_view");
    EXPECT_NE(n.kernel, "fill") << n.label;
  }
  s.forward();
  expect_close(back()[0].to_vector<double>(),
               finite_difference(s.forward, "qkv", s.qkv0, dot_with(s.c0), s.active));
}

// As above with columns of the packed array that no head reads ([6, 28]: the last 4 columns):
// the gradients' array is zero-filled first, and those columns' gradient is 0.
TEST(PlannedDerivative, SdpaOverSlicesLeavingColumnsOutZeroFillsTheRest) {
  PackedSdpa s = packed_sdpa(28);
  Graph back = diff::reverse(s.forward, {diff::Seed("result", s.c0)}, {"qkv"});
  int fills = 0;
  for (const NodeInfo& n : back.nodes()) fills += n.kernel == "fill" ? 1 : 0;
  EXPECT_EQ(fills, 1);
  s.forward();
  const std::vector<double> got = back()[0].to_vector<double>();
  expect_close(got, finite_difference(s.forward, "qkv", s.qkv0, dot_with(s.c0), s.active));
  for (int64_t row = 0; row < 6; ++row)
    for (int64_t col = 24; col < 28; ++col)
      EXPECT_EQ(got[static_cast<std::size_t>(row * 28 + col)], 0.0) << row << ", " << col;
}

TEST(PlannedDerivative, GdnOnARaggedBatch) {
  // Two sequences of 3 and 1 tokens (the reference packs them without padding).
  op::Graph og("gdn");
  const Tensor q = og.tensor({"q", {4, 1, 3}, f64});
  const Tensor k = og.tensor({"k", {4, 1, 3}, f64});
  const Tensor v = og.tensor({"v", {4, 2, 2}, f64});
  const Tensor g = og.tensor({"g", {4, 2}, f64});
  const Tensor beta = og.tensor({"beta", {4, 2}, f64});
  const Tensor cu = og.tensor({"cu", {3}, DType::i64});
  og.op("gdn", {{"q", q}, {"k", k}, {"v", v}, {"g", g}, {"beta", beta}, {"cu_seqlens", cu}},
        {{"use_qk_l2norm", true}})
      .at("o")
      .set_output(true)
      .set_name("o");
  const Kernel gdn = engines::planned_kernel(og);
  const std::vector<std::string> names = {"q", "k", "v", "g", "beta"};
  const std::vector<Array> init = {
      test::random_array({4, 1, 3}, f64, cpu), test::random_array({4, 1, 3}, f64, cpu),
      test::random_array({4, 2, 2}, f64, cpu), test::random_array({4, 2}, f64, cpu, -0.5, -0.05),
      test::random_array({4, 2}, f64, cpu, 0.1, 0.9)};
  const Array c0 = test::random_array({4, 2, 2}, f64, cpu);
  Graph f = Graph::record(
      [&](Recorder& r) {
        std::vector<Arg> args;
        for (std::size_t i = 0; i < names.size(); ++i)
          args.emplace_back(r.param(names[i], init[i]));
        args.emplace_back(r.param("cu", Array::from(std::vector<int64_t>{0, 3, 4}, {3}, cpu)));
        r.result(r.call(gdn, args));
      },
      RecordOptions{.record = true});
  f.build(cpu);
  Graph back = diff::reverse(f, {diff::Seed("result", c0)}, names);
  f();
  const std::vector<Array> grads = back();
  for (std::size_t i = 0; i < names.size(); ++i) {
    SCOPED_TRACE(names[i]);
    expect_close(grads[i].to_vector<double>(),
                 finite_difference(f, names[i], init[i], dot_with(c0)));
  }
}

TEST(PlannedDerivative, GdnOnARaggedBatchWithNaNPaddingRows) {
  // Sequences [0, 3), [3, 3) (empty) and [3, 5); row 5 padding, NaN in every input and in the
  // cotangent. The gradients' active rows are finite and right, their padding rows 0.
  op::Graph og("gdn");
  const Tensor q = og.tensor({"q", {6, 1, 3}, f64});
  const Tensor k = og.tensor({"k", {6, 1, 3}, f64});
  const Tensor v = og.tensor({"v", {6, 2, 2}, f64});
  const Tensor g = og.tensor({"g", {6, 2}, f64});
  const Tensor beta = og.tensor({"beta", {6, 2}, f64});
  const Tensor cu = og.tensor({"cu", {4}, DType::i64});
  og.op("gdn", {{"q", q}, {"k", k}, {"v", v}, {"g", g}, {"beta", beta}, {"cu_seqlens", cu}},
        {{"use_qk_l2norm", true}})
      .at("o")
      .set_output(true)
      .set_name("o");
  const Kernel gdn = engines::planned_kernel(og);
  const std::vector<std::string> names = {"q", "k", "v", "g", "beta"};
  const std::vector<std::pair<Array, std::vector<bool>>> init = {
      padded({6, 1, 3}, {5}), padded({6, 1, 3}, {5}), padded({6, 2, 2}, {5}),
      padded({6, 2}, {5}, -0.5, -0.05), padded({6, 2}, {5}, 0.1, 0.9)};
  const auto [c0, c_active] = padded({6, 2, 2}, {5});
  Graph f = Graph::record(
      [&](Recorder& r) {
        std::vector<Arg> args;
        for (std::size_t i = 0; i < names.size(); ++i)
          args.emplace_back(r.param(names[i], init[i].first));
        args.emplace_back(r.param("cu", Array::from(std::vector<int64_t>{0, 3, 3, 5}, {4}, cpu)));
        r.result(r.call(gdn, args));
      },
      RecordOptions{.record = true});
  f.build(cpu);
  Graph back = diff::reverse(f, {diff::Seed("result", c0)}, names);
  f();
  const std::vector<Array> grads = back();
  for (std::size_t i = 0; i < names.size(); ++i) {
    SCOPED_TRACE(names[i]);
    const auto& [x0, active] = init[i];
    const std::vector<double> got = grads[i].to_vector<double>();
    expect_close(got, finite_difference(f, names[i], x0, dot_with(c0), active));
    for (std::size_t e = 0; e < got.size(); ++e)
      if (!active[e]) {
        EXPECT_EQ(got[e], 0.0) << "padding element " << e;
      }
  }
}

TEST(PlannedDerivative, AnOpWithoutARuleIsRefusedNamingNodeAndOpAndTheForwardStillRuns) {
  op::Graph og("second_order");
  const Tensor y = og.tensor({"y", {2, 3}, f64});
  const Tensor dy = og.tensor({"dy", {2, 3}, f64});
  og.op("softmax_bwd", {{"y", y}, {"dy", dy}}, {}, "sbwd").at("dx").set_output(true);
  const Kernel k = engines::planned_kernel(og);
  const Array y0 = test::random_array({2, 3}, f64, cpu);
  const Array d0 = test::random_array({2, 3}, f64, cpu);
  Graph f = Graph::record(
      [&](Recorder& r) {
        r.result(r.call(kernels::sum(), {r.call(k, {r.param("y", y0), r.param("dy", d0)})}));
      },
      RecordOptions{.record = true});
  f.build(cpu);
  test::expect_throw_with<NotSupported>(
      [&] { diff::reverse(f, {"result"}, {"dy"}); },
      {"planned kernel 'second_order'", "node 'sbwd'", "op softmax_bwd", "no derivative rule"});
  const double before = f()[0].to_vector<double>()[0];
  EXPECT_TRUE(std::isfinite(before));
}

}  // namespace
}  // namespace eagle
