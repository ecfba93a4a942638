// op::backward against float64 central finite differences: every derivative rule of the op
// tables, on fresh random inputs, the backward graph (and its recompute graph) executed on the
// CPU reference engine. L = sum over the outputs of <cotangent, output>; the gradient of each
// wrt input must be dL/dx. Also: shared inputs summed, refusals naming node and op.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "eagle/engines/builtin.hpp"
#include "eagle/op/backward.hpp"
#include "eagle/op/graph.hpp"
#include "eagle/plan/plans.hpp"
#include "planned_runs.hpp"
#include "poison.hpp"
#include "random.hpp"
#include "test_util.hpp"

namespace eagle {
namespace {

using op::Tensor;
using Arrays = std::map<int64_t, Array>;  // by uid

const Device kCpu = Device::cpu();
constexpr DType f64 = DType::f64;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A graph planned once on the CPU (the reference engine) and run on given operands as they are
// (strided views included).
class Planned {
 public:
  explicit Planned(const op::Graph& g) : plans_(engines::create_execution_plans(g.clone(), kCpu)) {
    plans_.build_plans();
  }
  Arrays run(const Arrays& in) const {
    plan::VariantPack pack(plans_.layout());
    std::set<int64_t> mine;
    for (const Tensor& t : plans_.graph().operand_tensors()) mine.insert(t.uid());
    for (const auto& [uid, a] : in)
      if (mine.count(uid)) pack.set(uid, plan::Operand(a));
    Arrays out;
    for (const Tensor& t : test::outputs(plans_.graph())) {
      out[t.uid()] = test::poisoned(t.dims(), t.dtype(), kCpu);
      pack.set(t.uid(), plan::Operand(out[t.uid()]));
    }
    plans_.execute(pack, {});
    return out;
  }

 private:
  plan::ExecutionPlans plans_;
};

Array transposed_view(const Array& a) {
  Shape shape = a.shape(), strides = a.strides();
  std::swap(shape[shape.size() - 1], shape[shape.size() - 2]);
  std::swap(strides[strides.size() - 1], strides[strides.size() - 2]);
  return Array::wrap(a.data(), shape, a.dtype(), kCpu, strides, a.storage());
}

// Runs the backward of `f` (outputs `outs` with cotangents `cots`, gradients of `wrt`) on the
// reference engine: the forward, the recompute graph, then the backward graph.
std::vector<Array> backward_gradients(const op::Graph& f, const Arrays& in,
                                      const std::vector<Tensor>& outs, const Arrays& cots,
                                      const std::vector<Tensor>& wrt) {
  const op::BackwardGraph bw = op::backward(f, outs, wrt);
  Arrays forward = Planned(f).run(in);
  forward.insert(in.begin(), in.end());
  auto source = [&](const Tensor& t, const op::Source& s, const Arrays& recomputed) {
    Array a;
    switch (s.kind) {
      case op::Source::Kind::forward:
        a = forward.at(s.uid);
        break;
      case op::Source::Kind::cotangent:
        a = cots.at(s.uid);
        break;
      case op::Source::Kind::recomputed:
        a = recomputed.at(s.uid);
        break;
      case op::Source::Kind::constant: {  // rank 0, or a stride-0 broadcast of one element
        const Array one = test::from_doubles({s.value}, {}, t.dtype(), kCpu);
        if (t.dims().empty()) return one;
        return Array::wrap(one.data(), t.dims(), t.dtype(), kCpu, op::Dims(t.dims().size(), 0),
                           one.storage());
      }
    }
    if (s.transposed) return transposed_view(a);
    return a.shape() == t.dims() ? a : a.reshape(t.dims());
  };
  Arrays recomputed;
  if (!bw.recompute.nodes().empty()) {
    Arrays rin;
    for (const auto& [t, s] : bw.recompute_inputs) rin[t.uid()] = source(t, s, {});
    recomputed = Planned(bw.recompute).run(rin);
  }
  Arrays bout;
  if (!bw.graph.nodes().empty()) {
    Arrays bin;
    for (const auto& [t, s] : bw.inputs) bin[t.uid()] = source(t, s, recomputed);
    bout = Planned(bw.graph).run(bin);
  }
  std::vector<Array> grads;
  for (std::size_t w = 0; w < wrt.size(); ++w) {
    if (bw.gradients[w].defined()) {
      grads.push_back(bout.at(bw.gradients[w].uid()));
    } else {
      grads.push_back(test::from_doubles(
          std::vector<double>(static_cast<std::size_t>(test::numel(wrt[w].dims())), 0.0),
          wrt[w].dims(), wrt[w].dtype(), kCpu));
    }
  }
  return grads;
}

struct Check {
  op::Graph graph;
  Arrays inputs;
  std::vector<Tensor> outs;
  std::vector<Tensor> wrt;
  // Per wrt uid, the elements compared (all when absent): padding rows are not.
  std::map<int64_t, std::vector<bool>> active = {};
  // Per output uid, the cotangent (random in [-1, 1) when absent); NaN entries are left out of L.
  Arrays cots = {};
  double tolerance = 1e-6;
};

// L = sum of <cot, out> over the finite entries of cot.
double objective(const Arrays& out, const Arrays& cots) {
  double l = 0;
  for (const auto& [uid, c] : cots) {
    const std::vector<double> cv = c.to_vector<double>(), ov = out.at(uid).to_vector<double>();
    for (std::size_t i = 0; i < cv.size(); ++i)
      if (std::isfinite(cv[i])) l += cv[i] * ov[i];
  }
  return l;
}

void check(Check c) {
  for (const Tensor& o : c.outs)
    if (!c.cots.count(o.uid()))
      c.cots[o.uid()] = test::random_array(o.dims(), o.dtype(), kCpu, -1.0, 1.0);
  const std::vector<Array> got = backward_gradients(c.graph, c.inputs, c.outs, c.cots, c.wrt);
  const Planned forward(c.graph);
  for (std::size_t w = 0; w < c.wrt.size(); ++w) {
    const Tensor& t = c.wrt[w];
    SCOPED_TRACE("gradient of '" + t.name() + "'");
    ASSERT_EQ(got[w].shape(), t.dims());
    const std::vector<double> g = got[w].to_vector<double>();
    const std::vector<double> x = c.inputs.at(t.uid()).to_vector<double>();
    const auto act = c.active.find(t.uid());
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (act != c.active.end() && !act->second[i]) continue;
      const double h = 1e-6 * std::max(1.0, std::abs(x[i]));
      Arrays in = c.inputs;
      std::vector<double> xp = x, xm = x;
      xp[i] += h;
      xm[i] -= h;
      in[t.uid()] = Array::from(xp, t.dims(), kCpu);
      const double lp = objective(forward.run(in), c.cots);
      in[t.uid()] = Array::from(xm, t.dims(), kCpu);
      const double lm = objective(forward.run(in), c.cots);
      const double want = (lp - lm) / (2 * h);
      EXPECT_NEAR(g[i], want, c.tolerance * (1 + std::abs(want))) << "element " << i;
    }
  }
}

std::string dims_text(const op::Dims& d) {
  std::string s = "[";
  for (std::size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

Array uniform(const Tensor& t, double lo = -1.0, double hi = 1.0) {
  return test::random_array(t.dims(), t.dtype(), kCpu, lo, hi);
}

// ---- pointwise

struct Unary {
  const char* op;
  double lo, hi;
};

TEST(OpBackward, EveryDifferentiablePointwiseOpMatchesFiniteDifferences) {
  const std::vector<Unary> unary = {{"identity", -2, 2}, {"neg", -2, 2},         {"abs", -2, 2},
                                    {"exp", -2, 2},      {"log", 0.2, 3},        {"sqrt", 0.2, 3},
                                    {"rsqrt", 0.2, 3},   {"reciprocal", 0.3, 3}, {"square", -2, 2},
                                    {"tanh", -2, 2},     {"sigmoid", -3, 3},     {"relu", -2, 2},
                                    {"gelu", -3, 3},     {"gelu_tanh", -3, 3},   {"silu", -3, 3},
                                    {"softplus", -3, 3}, {"erf", -2, 2},         {"sin", -3, 3},
                                    {"cos", -3, 3},      {"floor", -3, 3},       {"ceil", -3, 3}};
  for (const Unary& u : unary) {
    SCOPED_TRACE(u.op);
    op::Graph g(u.op);
    const Tensor a = g.tensor({"a", {2, 3}, f64});
    const Tensor y = g.pointwise(u.op, a).set_output(true).set_name("y");
    check({g, {{a.uid(), uniform(a, u.lo, u.hi)}}, {y}, {a}});
  }
}

struct Binary {
  const char* op;
  double alo, ahi, blo, bhi;
};

TEST(OpBackward, BinaryOpsSumTheCotangentOverBroadcastAxes) {
  const std::vector<Binary> binary = {
      {"add", -2, 2, -2, 2},          {"sub", -2, 2, -2, 2},    {"mul", -2, 2, -2, 2},
      {"div", -2, 2, 0.5, 2},         {"max", -2, 2, -2, 2},    {"min", -2, 2, -2, 2},
      {"pow", 0.5, 2, -1.5, 1.5},     {"mod", -3, 3, 0.7, 1.3}, {"gelu_backward", -2, 2, -3, 3},
      {"silu_backward", -2, 2, -3, 3}};
  for (const Binary& b : binary) {
    for (const op::Dims& bd : {op::Dims{2, 3}, op::Dims{3}, op::Dims{2, 1}}) {
      SCOPED_TRACE(std::string(b.op) + " b " + dims_text(bd));
      op::Graph g(b.op);
      const Tensor ta = g.tensor({"a", {2, 3}, f64});
      const Tensor tb = g.tensor({"b", bd, f64});
      const Tensor y = g.pointwise(b.op, ta, tb).set_output(true).set_name("y");
      check({g,
             {{ta.uid(), uniform(ta, b.alo, b.ahi)}, {tb.uid(), uniform(tb, b.blo, b.bhi)}},
             {y},
             {ta, tb}});
    }
  }
}

TEST(OpBackward, WhereAndComparisonsRouteTheCotangent) {
  op::Graph g("select");
  const Tensor c = g.tensor({"c", {2, 3}, DType::boolean});
  const Tensor a = g.tensor({"a", {2, 3}, f64});
  const Tensor b = g.tensor({"b", {1, 3}, f64});
  const Tensor w = g.where(c, a, b);
  // max written with a comparison: the boolean carries no gradient
  const Tensor m = g.where(g.pointwise("cmp_gt", a, b), a, b);
  const Tensor y = g.pointwise("add", w, m).set_output(true).set_name("y");
  check({g,
         {{c.uid(), test::random_array({2, 3}, DType::boolean, kCpu)},
          {a.uid(), uniform(a)},
          {b.uid(), uniform(b)}},
         {y},
         {a, b}});
}

TEST(OpBackward, CastGoesBackToTheInputDtype) {
  op::Graph g("cast");
  const Tensor a = g.tensor({"a", {4}, f64});
  Tensor y = g.pointwise("mul", g.pointwise("cast", a, {{"dtype", op::Attr(DType::f32)}}),
                         g.pointwise("cast", a, {{"dtype", op::Attr(DType::f32)}}));
  y.set_output(true);
  const op::BackwardGraph bw = op::backward(g, {y}, {a});
  ASSERT_TRUE(bw.gradients[0].defined());
  EXPECT_EQ(bw.gradients[0].dtype(), f64);
}

// ---- structured

TEST(OpBackward, ReductionsBroadcastTheCotangentBack) {
  struct Shape3 {
    std::vector<int64_t> axes;
    bool keepdim;
  };
  for (const char* mode : {"sum", "mean", "max", "min", "l2", "amax", "prod"}) {
    for (const Shape3& s :
         {Shape3{{1}, true}, Shape3{{0}, false}, Shape3{{}, false}, Shape3{{0, 1}, true}}) {
      SCOPED_TRACE(std::string(mode) + " axes " + dims_text(s.axes) +
                   (s.keepdim ? " keepdim" : ""));
      op::Graph g("reduce");
      const Tensor x = g.tensor({"x", {3, 4}, f64});
      const Tensor y = g.op("reduction", {{"x", x}},
                            {{"mode", op::Attr(mode)},
                             {"axes", op::Attr(s.axes)},
                             {"keepdim", op::Attr(s.keepdim)}})
                           .at("y")
                           .set_output(true);
      check({g, {{x.uid(), uniform(x, 0.3, 2)}}, {y}, {x}});
    }
  }
}

// The broadcast of a sum's (or mean's) cotangent takes x's dims from a stride-0 constant, not
// from x: the backward reads no forward tensor, so a graph runs it without waiting for x.
TEST(OpBackward, ASumsBackwardReadsNoForwardTensor) {
  for (const char* mode : {"sum", "mean"}) {
    SCOPED_TRACE(mode);
    op::Graph g("reduce");
    const Tensor x = g.tensor({"x", {3, 4}, f64});
    Tensor y = g.op("reduction", {{"x", x}}, {{"mode", op::Attr(mode)}}).at("y");
    y.set_output(true);
    const op::BackwardGraph b = op::backward(g, {y}, {x});
    bool broadcast = false;
    for (const auto& [t, src] : b.inputs) {
      EXPECT_NE(src.kind, op::Source::Kind::forward) << t.name();
      if (src.kind == op::Source::Kind::constant && t.dims() == op::Dims{3, 4}) {
        broadcast = true;
        EXPECT_EQ(t.strides(), (op::Dims{0, 0})) << t.name();
      }
    }
    EXPECT_TRUE(broadcast) << "no constant in x's dims";
    check({g, {{x.uid(), uniform(x)}}, {y}, {x}});
  }
}

TEST(OpBackward, ASumOrMeanOverTrailingAxesWithoutKeepdimReadsItsCotangentReshaped) {
  for (const char* mode : {"sum", "mean"}) {
    SCOPED_TRACE(mode);
    op::Graph g("reduce");
    const Tensor x = g.tensor({"x", {3, 4, 2}, f64});
    Tensor y = g.op("reduction", {{"x", x}}, {{"mode", op::Attr(mode)}, {"axes", {1}}}).at("y");
    y.set_output(true);
    check({g, {{x.uid(), uniform(x)}}, {y}, {x}});
  }
}

TEST(OpBackward, ReductionOverTrailingAxesWithoutKeepdimReadInsideIsRefused) {
  op::Graph g("reduce");
  const Tensor x = g.tensor({"x", {3, 4}, f64});
  Tensor y = g.op("reduction", {{"x", x}}, {{"mode", "sum"}, {"axes", {1}}}, "rowsum").at("y");
  const Tensor z = g.pointwise("exp", y).set_output(true);
  test::expect_throw_with<NotSupported>([&] { op::backward(g, {z}, {x}); },
                                        {"node 'rowsum' (op reduction)", "keepdim = true"});
  op::Graph h("reduce_max");
  const Tensor hx = h.tensor({"x", {3, 4}, f64});
  const Tensor hy = h.op("reduction", {{"x", hx}}, {{"mode", "max"}, {"axes", {1}}}, "rowmax")
                        .at("y")
                        .set_output(true);
  test::expect_throw_with<NotSupported>([&] { op::backward(h, {hy}, {hx}); },
                                        {"node 'rowmax' (op reduction)"});
}

TEST(OpBackward, SoftmaxAndLogSoftmaxGoThroughSoftmaxBwd) {
  for (const bool log : {false, true}) {
    for (const int64_t axis : {-1, 0}) {
      SCOPED_TRACE(std::string(log ? "log_softmax" : "softmax") + " axis " + std::to_string(axis));
      op::Graph g("softmax");
      const Tensor x = g.tensor({"x", {3, 5}, f64});
      const Tensor y = g.op("softmax", {{"x", x}}, {{"axis", op::Attr(axis)}, {"log", log}})
                           .at("y")
                           .set_output(true);
      check({g, {{x.uid(), uniform(x, -2, 2)}}, {y}, {x}});
    }
  }
}

TEST(OpBackward, NormsGoThroughTheirBackwardOpsWithStatisticsReadOrRecomputed) {
  for (const char* norm : {"layer_norm", "rms_norm"}) {
    for (const bool training : {false, true}) {
      SCOPED_TRACE(std::string(norm) +
                   (training ? " training (statistics read)" : " (statistics recomputed)"));
      op::Graph g(norm);
      const Tensor x = g.tensor({"x", {3, 2, 4}, f64});
      const Tensor scale = g.tensor({"scale", {4}, f64});
      const Tensor bias = g.tensor({"bias", {4}, f64});
      auto out = g.op(norm, {{"x", x}, {"scale", scale}, {"bias", bias}},
                      {{"epsilon", 1e-3}, {"training", training}});
      const Tensor y = out.at("y").set_output(true);
      for (auto& [port, t] : out)
        if (port != "y") t.set_output(true);  // the statistics, when training
      const op::BackwardGraph bw = op::backward(g, {y}, {x, scale, bias});
      EXPECT_EQ(bw.recompute.nodes().empty(), training);
      check({g,
             {{x.uid(), uniform(x, -2, 2)},
              {scale.uid(), uniform(scale, 0.5, 2)},
              {bias.uid(), uniform(bias)}},
             {y},
             {x, scale, bias}});
    }
  }
}

TEST(OpBackward, MatmulIsTwoMatmulsOverTransposedOperands) {
  struct MatmulCase {
    op::Dims a, b, bias;
  };
  for (const MatmulCase& m : {MatmulCase{{3, 4}, {4, 2}, {2}}, MatmulCase{{2, 3, 4}, {4, 5}, {}},
                              MatmulCase{{2, 3, 4}, {2, 4, 5}, {3, 1}}}) {
    SCOPED_TRACE("a " + dims_text(m.a) + " b " + dims_text(m.b));
    op::Graph g("matmul");
    const Tensor a = g.tensor({"a", m.a, f64});
    const Tensor b = g.tensor({"b", m.b, f64});
    Tensor bias;
    Arrays in = {{a.uid(), uniform(a)}, {b.uid(), uniform(b)}};
    if (!m.bias.empty()) {
      bias = g.tensor({"bias", m.bias, f64});
      in[bias.uid()] = uniform(bias);
    }
    const Tensor c = g.matmul(a, b, bias).set_output(true);
    check(
        {g, in, {c}, bias.defined() ? std::vector<Tensor>{a, b, bias} : std::vector<Tensor>{a, b}});
  }
}

TEST(OpBackward, EmbeddingSumsRowsPerId) {
  op::Graph g("embedding");
  const Tensor table = g.tensor({"table", {5, 3}, f64});
  const Tensor ids = g.tensor({"ids", {2, 4}, DType::i64});
  const Tensor y = g.op("embedding", {{"table", table}, {"ids", ids}}).at("y").set_output(true);
  const Array idv = Array::from(std::vector<int64_t>{0, 3, 3, 1, 4, 0, 3, 2}, {2, 4}, kCpu);
  check({g, {{table.uid(), uniform(table)}, {ids.uid(), idv}}, {y}, {table}});
}

TEST(OpBackward, CrossEntropyGoesThroughCrossEntropyBwd) {
  for (const char* reduction : {"mean", "sum", "none"}) {
    for (const bool lse : {false, true}) {
      SCOPED_TRACE(std::string(reduction) + (lse ? " (lse read)" : ""));
      op::Graph g("ce");
      const Tensor logits = g.tensor({"logits", {4, 5}, f64});
      const Tensor targets = g.tensor({"targets", {4}, DType::i64});
      auto out = g.op("cross_entropy", {{"logits", logits}, {"targets", targets}},
                      {{"reduction", op::Attr(reduction)},
                       {"label_smoothing", 0.1},
                       {"ignore_index", 7},
                       {"output_lse", lse}});
      const Tensor loss = out.at("loss").set_output(true);
      if (lse) out.at("lse").set_output(true);
      const Array tv = Array::from(std::vector<int64_t>{2, 7, 0, 4}, {4}, kCpu);  // one ignored
      check({g, {{logits.uid(), uniform(logits, -2, 2)}, {targets.uid(), tv}}, {loss}, {logits}});
    }
  }
}

// A mean's backward divides the cotangent by the count of targets not ignored, a node that
// reads only the targets (a graph runs it off the backward's path), then weighs rows as a sum.
TEST(OpBackward, AMeanCrossEntropyCountsItsTargetsInANodeOfTheirOwn) {
  op::Graph g("ce");
  const Tensor logits = g.tensor({"logits", {4, 5}, f64});
  const Tensor targets = g.tensor({"targets", {4}, DType::i32});
  const Tensor loss =
      g.op("cross_entropy", {{"logits", logits}, {"targets", targets}}, {{"ignore_index", 7}})
          .at("loss")
          .set_output(true);
  const op::BackwardGraph b = op::backward(g, {loss}, {logits});
  std::vector<std::string> ops;
  for (const op::Node& n : b.graph.nodes()) {
    ops.push_back(n.op());
    if (n.op() == "count_not_equal") {
      EXPECT_EQ(n.inputs().size(), 1u);
      EXPECT_EQ(n.attr("value").as_int("value"), 7);
      EXPECT_EQ(n.output("y").dtype(), f64);  // the cotangent's dtype
      for (const auto& [t, src] : b.inputs)
        if (t == n.input("x")) {
          EXPECT_EQ(src.kind, op::Source::Kind::forward);
          EXPECT_EQ(src.uid, targets.uid());
        }
    }
    if (n.op() == "cross_entropy_bwd") {
      EXPECT_EQ(n.attr("reduction").as_text("reduction"), "sum");
    }
  }
  EXPECT_EQ(ops, (std::vector<std::string>{"count_not_equal", "div", "cross_entropy_bwd"}));
}

TEST(OpBackward, CountNotEqualCountsWhatDiffersFromItsValue) {
  op::Graph g("count");
  const Tensor x = g.tensor({"x", {2, 3}, DType::i64});
  const Tensor y = g.op("count_not_equal", {{"x", x}}, {{"value", -1}}).at("y").set_output(true);
  EXPECT_EQ(y.dims(), op::Dims{});
  EXPECT_EQ(y.dtype(), DType::f32);
  test::expect_throw_with<InvalidArgument>(
      [&] {
        g.op("count_not_equal", {{"x", x}}, {{"dtype", DType::i32}});
      },
      {"dtype must be f32 or f64"});
  const Array xv = Array::from(std::vector<int64_t>{-1, 3, -1, 0, 5, -1}, {2, 3}, kCpu);
  const Arrays out = Planned(g).run({{x.uid(), xv}});
  EXPECT_EQ(out.at(y.uid()).to_vector<float>(), std::vector<float>{3.0f});
}

// ---- captured

TEST(OpBackward, SdpaOnARaggedBatchWithNaNPaddingRows) {
  // q rows: sequences [0, 3) and [3, 7), row 7 padding; kv rows: [0, 4) and [4, 6), row 6
  // padding. Causal, bottom-right aligned; two query heads share one kv head.
  const std::vector<int64_t> cu_q = {0, 3, 7}, cu_kv = {0, 4, 6};
  for (const bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "full");
    op::Graph g("sdpa");
    const Tensor q = g.tensor({"q", {8, 2, 4}, f64});
    const Tensor k = g.tensor({"k", {7, 1, 4}, f64});
    const Tensor v = g.tensor({"v", {7, 1, 3}, f64});
    const Tensor cq = g.tensor({"cu_seqlens_q", {3}, DType::i64});
    const Tensor ckv = g.tensor({"cu_seqlens_kv", {3}, DType::i64});
    const Tensor o =
        g.op("sdpa", {{"q", q}, {"k", k}, {"v", v}, {"cu_seqlens_q", cq}, {"cu_seqlens_kv", ckv}},
             {{"causal", causal}})
            .at("o")
            .set_output(true);
    auto padded = [&](const Tensor& t, int64_t pad_row) {
      std::vector<double> x = test::random_values(static_cast<std::size_t>(test::numel(t.dims())));
      const int64_t row = test::numel(t.dims()) / t.dims()[0];
      std::vector<bool> active(x.size(), true);
      for (int64_t i = pad_row * row; i < (pad_row + 1) * row; ++i) {
        x[static_cast<std::size_t>(i)] = kNaN;
        active[static_cast<std::size_t>(i)] = false;
      }
      return std::make_pair(test::from_doubles(x, t.dims(), t.dtype(), kCpu), active);
    };
    const auto [qa, q_active] = padded(q, 7);
    const auto [ka, k_active] = padded(k, 6);
    const auto [va, v_active] = padded(v, 6);
    const auto [ca, c_active] = padded(o, 7);  // the cotangent's padding row is NaN too
    check({g,
           {{q.uid(), qa},
            {k.uid(), ka},
            {v.uid(), va},
            {cq.uid(), Array::from(cu_q, {3}, kCpu)},
            {ckv.uid(), Array::from(cu_kv, {3}, kCpu)}},
           {o},
           {q, k, v},
           {{q.uid(), q_active}, {k.uid(), k_active}, {v.uid(), v_active}},
           {{o.uid(), ca}}});
  }
}

TEST(OpBackward, SdpaBwdKeepsTheForwardsMaxSeqlen) {
  // The bound sizes the backward's grids as it does the forward's: sdpa_bwd carries it, and
  // the gradients are those of the unbounded op where the batch keeps it.
  op::Graph g("sdpa");
  const Tensor q = g.tensor({"q", {7, 2, 4}, f64});
  const Tensor k = g.tensor({"k", {7, 1, 4}, f64});
  const Tensor v = g.tensor({"v", {7, 1, 3}, f64});
  const Tensor cu = g.tensor({"cu_seqlens", {3}, DType::i64});
  const Tensor o =
      g.op("sdpa", {{"q", q}, {"k", k}, {"v", v}, {"cu_seqlens_q", cu}, {"cu_seqlens_kv", cu}},
           {{"causal", true}, {"max_seqlen_q", 4}, {"max_seqlen_kv", 5}})
          .at("o")
          .set_output(true);
  const op::BackwardGraph bw = op::backward(g, {o}, {q, k, v});
  int found = 0;
  for (const op::Node& n : bw.graph.nodes()) {
    if (n.op() != "sdpa_bwd") continue;
    ++found;
    EXPECT_EQ(n.attr("max_seqlen_q").as_int("max_seqlen_q"), 4);
    EXPECT_EQ(n.attr("max_seqlen_kv").as_int("max_seqlen_kv"), 5);
  }
  EXPECT_EQ(found, 1);
  check({g,
         {{q.uid(), uniform(q)},
          {k.uid(), uniform(k)},
          {v.uid(), uniform(v)},
          {cu.uid(), Array::from(std::vector<int64_t>{0, 3, 7}, {3}, kCpu)}},
         {o},
         {q, k, v}});
}

TEST(OpBackward, DenseSdpaWithStatisticsRead) {
  op::Graph g("sdpa_dense");
  const Tensor q = g.tensor({"q", {2, 3, 2, 4}, f64});
  const Tensor k = g.tensor({"k", {2, 4, 2, 4}, f64});
  const Tensor v = g.tensor({"v", {2, 4, 2, 3}, f64});
  auto out = g.op("sdpa", {{"q", q}, {"k", k}, {"v", v}},
                  {{"causal", true}, {"scale", 0.7}, {"generate_stats", true}});
  const Tensor o = out.at("o").set_output(true);
  out.at("stats").set_output(true);  // exposed: the backward reads o and stats, recomputes nothing
  const op::BackwardGraph bw = op::backward(g, {o}, {q, k, v});
  EXPECT_TRUE(bw.recompute.nodes().empty());
  check({g, {{q.uid(), uniform(q)}, {k.uid(), uniform(k)}, {v.uid(), uniform(v)}}, {o}, {q, k, v}});
}

TEST(OpBackward, NormsWithoutScaleOverTwoNormalizedDims) {
  for (const char* norm : {"layer_norm", "rms_norm"}) {
    SCOPED_TRACE(norm);
    op::Graph g(norm);
    const Tensor x = g.tensor({"x", {2, 3, 4}, f64});
    const Tensor y = g.op(norm, {{"x", x}}, {{"normalized_ndim", 2}}).at("y").set_output(true);
    check({g, {{x.uid(), uniform(x, -2, 2)}}, {y}, {x}});
  }
}

TEST(OpBackward, LinearAttentionsGoThroughTheirBackwardOps) {
  // Two sequences of 2 and 3 tokens; initial and final state; gdn with safe_gate and the beta
  // sigmoid, kda and gdn2 with the qk l2 norm.
  for (const char* rule : {"gdn", "kda", "gdn2"}) {
    SCOPED_TRACE(rule);
    const std::string r = rule;
    const int64_t t = 5, h = 1, hv = 2, kd = 3, vd = 2;
    op::Graph g(rule);
    Arrays in;
    std::vector<Tensor> wrt;
    auto add = [&](const std::string& name, const op::Dims& dims, double lo, double hi) {
      const Tensor x = g.tensor({name, dims, f64});
      in[x.uid()] = uniform(x, lo, hi);
      wrt.push_back(x);
      return x;
    };
    op::Ports ports = {{"q", add("q", {t, h, kd}, -1, 1)},
                       {"k", add("k", {t, h, kd}, -1, 1)},
                       {"v", add("v", {t, hv, vd}, -1, 1)}};
    ports.emplace_back("g",
                       r == "gdn" ? add("g", {t, hv}, -1, 1) : add("g", {t, hv, kd}, -0.5, -0.05));
    if (r == "gdn2") {
      ports.emplace_back("b", add("b", {t, hv, kd}, 0.1, 0.9));
      ports.emplace_back("w", add("w", {t, hv, vd}, 0.1, 0.9));
    } else {
      ports.emplace_back("beta", add("beta", {t, hv}, r == "gdn" ? -1 : 0.1, 0.9));
    }
    const Tensor cu = g.tensor({"cu_seqlens", {3}, DType::i64});
    in[cu.uid()] = Array::from(std::vector<int64_t>{0, 2, 5}, {3}, kCpu);
    ports.emplace_back("cu_seqlens", cu);
    ports.emplace_back("initial_state", add("initial_state", {2, hv, kd, vd}, -0.5, 0.5));
    op::Attrs attrs = {{"output_final_state", true}};
    if (r == "gdn") {
      ports.emplace_back("a_log", add("a_log", {hv}, -1, 0));
      ports.emplace_back("dt_bias", add("dt_bias", {hv}, -0.5, 0.5));
      attrs.emplace_back("safe_gate", true);
      attrs.emplace_back("use_beta_sigmoid", true);
    } else {
      attrs.emplace_back("use_qk_l2norm", true);
    }
    auto out = g.op(rule, ports, attrs);
    const Tensor o = out.at("o").set_output(true);
    const Tensor fs = out.at("final_state").set_output(true);
    check({g, in, {o, fs}, wrt, {}, {}, 1e-5});
  }
}

// ---- whole graphs

TEST(OpBackward, AnMlpWithCrossEntropyRecomputesItsIntermediates) {
  op::Graph g("mlp");
  const Tensor x = g.tensor({"x", {4, 3}, f64});
  const Tensor w1 = g.tensor({"w1", {3, 5}, f64});
  const Tensor b1 = g.tensor({"b1", {5}, f64});
  const Tensor w2 = g.tensor({"w2", {5, 6}, f64});
  const Tensor targets = g.tensor({"targets", {4}, DType::i64});
  const Tensor h = g.pointwise("gelu", g.matmul(x, w1, b1));
  const Tensor logits = g.matmul(h, w2);
  const Tensor loss =
      g.op("cross_entropy", {{"logits", logits}, {"targets", targets}}).at("loss").set_output(true);
  const op::BackwardGraph bw = op::backward(g, {loss}, {x, w1, b1, w2});
  EXPECT_FALSE(bw.recompute.nodes().empty());  // h and logits are virtual
  check({g,
         {{x.uid(), uniform(x)},
          {w1.uid(), uniform(w1)},
          {b1.uid(), uniform(b1)},
          {w2.uid(), uniform(w2)},
          {targets.uid(), Array::from(std::vector<int64_t>{1, 5, 0, 3}, {4}, kCpu)}},
         {loss},
         {x, w1, b1, w2}});
}

TEST(OpBackward, ATensorReadByManyNodesGetsTheSumOfTheirContributions) {
  op::Graph g("shared");
  const Tensor x = g.tensor({"x", {2, 3}, f64});
  const Tensor s = g.op("softmax", {{"x", g.pointwise("mul", x, x)}}).at("y");
  const Tensor y = g.op("rms_norm", {{"x", g.pointwise("add", s, g.pointwise("sin", x))}})
                       .at("y")
                       .set_output(true);
  const Tensor z = g.pointwise("exp", x).set_output(true);  // a second output
  check({g, {{x.uid(), uniform(x)}}, {y, z}, {x}});
}

TEST(OpBackward, AGradientThatIsACotangentPassesThroughAnIdentity) {
  op::Graph g("pass");
  const Tensor a = g.tensor({"a", {3}, f64});
  const Tensor b = g.tensor({"b", {3}, f64});
  const Tensor y = g.pointwise("add", a, b).set_output(true);
  const op::BackwardGraph bw = op::backward(g, {y}, {a, b});
  ASSERT_TRUE(bw.gradients[0].defined() && bw.gradients[1].defined());
  EXPECT_NE(bw.gradients[0], bw.gradients[1]);
  check({g, {{a.uid(), uniform(a)}, {b.uid(), uniform(b)}}, {y}, {a, b}});
}

// ---- refusals

TEST(OpBackward, AnOpWithoutARuleOnThePathIsRefusedNamingNodeAndOp) {
  op::Graph g("second_order");
  const Tensor y = g.tensor({"y", {2, 3}, f64});
  const Tensor dy = g.tensor({"dy", {2, 3}, f64});
  Tensor dx = g.op("softmax_bwd", {{"y", y}, {"dy", dy}}, {}, "sbwd").at("dx");
  dx.set_output(true);
  test::expect_throw_with<NotSupported>([&] { op::backward(g, {dx}, {dy}); },
                                        {"node 'sbwd' (op softmax_bwd)"});
  // Off the path it is fine: nothing is differentiated through it.
  const Tensor a = g.tensor({"a", {2, 3}, f64});
  const Tensor z = g.pointwise("add", a, dx).set_output(true);
  const op::BackwardGraph bw = op::backward(g, {z}, {a});
  EXPECT_TRUE(bw.gradients[0].defined());
}

TEST(OpBackward, BadArgumentsAreRefused) {
  op::Graph g("g");
  const Tensor a = g.tensor({"a", {3}, f64});
  const Tensor i = g.tensor({"i", {3}, DType::i32});
  const Tensor v = g.pointwise("exp", a);  // virtual
  const Tensor y =
      g.pointwise("mul", v, g.pointwise("cast", i, {{"dtype", op::Attr(f64)}})).set_output(true);
  test::expect_throw_with<InvalidArgument>([&] { op::backward(g, {v}, {a}); },
                                           {"only outputs of the graph"});
  test::expect_throw_with<InvalidArgument>([&] { op::backward(g, {y}, {v}); },
                                           {"gradients are of graph inputs"});
  test::expect_throw_with<InvalidArgument>([&] { op::backward(g, {y}, {i}); },
                                           {"not floating point"});
  op::Graph other("other");
  const Tensor b = other.tensor({"b", {3}, f64});
  test::expect_throw_with<InvalidArgument>([&] { op::backward(g, {y}, {b}); },
                                           {"not of graph 'g'"});
}

}  // namespace
}  // namespace eagle
