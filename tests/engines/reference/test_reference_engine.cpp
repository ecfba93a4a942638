// The reference engine end to end through planning: graphs are planned for the CPU, built,
// executed with a variant pack, and their outputs (poisoned first) are checked against
// hand-computed values and the float64 oracles of tests/support/oracles/ (written from the ops'
// definitions), never against the reference math the engine itself calls.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "eagle/engines/builtin.hpp"
#include "eagle/op/graph.hpp"
#include "eagle/plan/plans.hpp"
#include "engines/reference/math/structured.hpp"
#include "engines/reference/math/structured_grad.hpp"
#include "oracles/attention.hpp"
#include "oracles/gradient.hpp"
#include "oracles/pointwise.hpp"
#include "oracles/structured.hpp"
#include "test_util.hpp"

namespace eagle {
namespace {

using op::Attrs;
using op::Graph;
using op::Ports;
using op::Tensor;
using test::expect_all_near;
using test::expect_throw_with;
using test::from_doubles;
using test::numel;
using test::random_values;
using test::rel_error;
using test::to_dense;
using test::tolerance;
using test::values;
using test::oracle::central_difference;
using test::oracle::sigmoid;
using test::oracle::softplus;

const Device kCpu = Device::cpu();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- helpers -------------------------------------------------------------------------------

Tensor input(Graph& g, const std::string& name, const op::Dims& dims, DType dtype = DType::f32) {
  return g.tensor({name, dims, dtype});
}

// Plans `g` for the CPU and builds the first plan that builds.
plan::ExecutionPlans build(const Graph& g) {
  plan::ExecutionPlans plans = engines::create_execution_plans(g, kCpu);
  plans.build_plans();
  return plans;
}

using Bindings = std::vector<std::pair<Tensor, Array>>;

plan::VariantPack pack_of(const plan::ExecutionPlans& plans, const Bindings& bindings) {
  plan::VariantPack pack(plans.layout());
  for (const auto& [t, a] : bindings) pack.set(t, plan::Operand(a));
  return pack;
}

void execute(const plan::ExecutionPlans& plans, const Bindings& bindings) {
  plans.execute(pack_of(plans, bindings), {});
}

// A fresh output array for `t`, poisoned so unwritten elements show.
Array poisoned(const Tensor& t) {
  return test::poisoned(t.dims(), t.dtype(), kCpu);
}

// An output array for `t` filled with a finite sentinel (tells "untouched" from a written NaN).
Array sentinel(const Tensor& t, double value = 777.0) {
  Array a = Array::empty(t.dims(), t.dtype(), kCpu);
  a.copy_from(from_doubles(std::vector<double>(static_cast<std::size_t>(a.numel()), value),
                           a.shape(), a.dtype(), kCpu));
  return a;
}

Array array(const std::vector<double>& v, const Shape& shape, DType dtype = DType::f32) {
  return from_doubles(v, shape, dtype, kCpu);
}

// Fresh random values in [lo, hi) as a CPU array of `dtype`.
Array random(const Shape& shape, double lo = -1.0, double hi = 1.0, DType dtype = DType::f32) {
  return test::random_array(shape, dtype, kCpu, lo, hi);
}

bool all_equal(const Array& a, double value) {
  for (double x : values(a))
    if (x != value) return false;
  return true;
}

bool all_finite(const Array& a) {
  for (double x : values(a))
    if (!std::isfinite(x)) return false;
  return true;
}

// ---- plan list and families ----------------------------------------------------------------

// Checks that `g` is classified into `family` and that the entry that builds is the reference
// engine, the family's slot 0.
void expect_reference_plan(const Graph& g, const std::string& family) {
  SCOPED_TRACE(family);
  plan::ExecutionPlans plans = engines::create_execution_plans(g, kCpu);
  EXPECT_EQ(plans.family(), family);
  ASSERT_GE(plans.count(), 1);
  const int built = plans.build_plans();
  EXPECT_EQ(plans.name_at(built), "reference");
  EXPECT_EQ(plans.at(built).engine_id, engines::builtin_manifest().engine_id(family, 0));
  EXPECT_TRUE(plans.at(built).knobs.empty());
  EXPECT_EQ(plans.selected(), built);
  // Nothing before it: every earlier entry declined.
  EXPECT_EQ(plans.declines().size(), static_cast<std::size_t>(built));
}

TEST(ReferenceEnginePlanning, PointwiseCpuPlanListStartsWithTheReference) {
  for (plan::HeurMode mode :
       {plan::HeurMode::A, plan::HeurMode::FALLBACK, plan::HeurMode::OPENSOURCE}) {
    Graph g("pw");
    Tensor a = input(g, "a", {2, 3}), b = input(g, "b", {2, 3});
    g.pointwise("add", a, b).set_output(true);
    plan::ExecutionPlans plans = engines::create_execution_plans(g, kCpu, {mode});
    EXPECT_EQ(plans.family(), "pointwise");
    ASSERT_GE(plans.count(), 1);
    // On the CPU no native (CUDA) entry is listed: the reference is first and builds.
    EXPECT_EQ(plans.name_at(0), "reference");
    EXPECT_EQ(plans.at(0).engine_id, engines::builtin_manifest().engine_id("pointwise", 0));
    EXPECT_EQ(plans.build_plans(), 0);
    EXPECT_TRUE(plans.is_built(0));
    EXPECT_EQ(plans.workspace_size(), 0u);
    EXPECT_NE(plans.describe().find("reference"), std::string::npos);
  }
}

TEST(ReferenceEnginePlanning, EveryFamilyClassifiesAndBuildsTheReference) {
  {
    Graph g("pw2");
    Tensor x = input(g, "x", {4});
    Tensor y = g.pointwise("exp", x);
    g.op("reduction", {{"x", y}}, {{"mode", "sum"}}).at("y").set_output(true);
    expect_reference_plan(g, "pointwise");
  }
  {
    Graph g("gemm");
    g.matmul(input(g, "a", {2, 3}), input(g, "b", {3, 4})).set_output(true);
    expect_reference_plan(g, "gemm");
  }
  for (const char* op : {"softmax", "layer_norm", "rms_norm"}) {
    Graph g(op);
    g.op(op, {{"x", input(g, "x", {2, 8})}}).at("y").set_output(true);
    expect_reference_plan(g, "normalization");
  }
  {
    Graph g("embedding");
    g.op("embedding",
         {{"table", input(g, "table", {5, 3})}, {"ids", input(g, "ids", {4}, DType::i32)}})
        .at("y")
        .set_output(true);
    expect_reference_plan(g, "embedding");
  }
  {
    Graph g("loss");
    g.op("cross_entropy", {{"logits", input(g, "logits", {4, 5})},
                           {"targets", input(g, "targets", {4}, DType::i64)}})
        .at("loss")
        .set_output(true);
    expect_reference_plan(g, "loss");
  }
  // q: a tensor of the graph, or a fresh input (an input no node reads fails validation).
  const auto sdpa_ports = [](Graph& g, Tensor q = {}) {
    return Ports{{"q", q.defined() ? q : input(g, "q", {5, 2, 4})},
                 {"k", input(g, "k", {6, 2, 4})},
                 {"v", input(g, "v", {6, 2, 4})},
                 {"cu_seqlens_q", input(g, "cu_q", {3}, DType::i32)},
                 {"cu_seqlens_kv", input(g, "cu_kv", {3}, DType::i32)}};
  };
  {
    Graph g("sdpa");
    g.op("sdpa", sdpa_ports(g)).at("o").set_output(true);
    expect_reference_plan(g, "sdpa");
  }
  {
    Graph g("sdpa_bwd");
    Ports p = sdpa_ports(g);
    p.emplace_back("o", input(g, "o", {5, 2, 4}));
    p.emplace_back("d_o", input(g, "d_o", {5, 2, 4}));
    p.emplace_back("stats", input(g, "stats", {5, 2}));
    for (auto& [port, t] : g.op("sdpa_bwd", p)) t.set_output(true);
    expect_reference_plan(g, "sdpa_bwd");
  }
  for (const std::string rule : {"gdn", "kda", "gdn2"}) {
    for (bool bwd : {false, true}) {
      Graph g(rule + (bwd ? "_bwd" : ""));
      const op::Dims gate = rule == "gdn" ? op::Dims{4, 2} : op::Dims{4, 2, 3};
      Ports p = {{"q", input(g, "q", {4, 1, 3})},
                 {"k", input(g, "k", {4, 1, 3})},
                 {"v", input(g, "v", {4, 2, 2})},
                 {"g", input(g, "g", gate)},
                 {"cu_seqlens", input(g, "cu", {2}, DType::i32)}};
      if (rule == "gdn2") {
        p.emplace_back("b", input(g, "b", {4, 2, 3}));
        p.emplace_back("w", input(g, "w", {4, 2, 2}));
      } else {
        p.emplace_back("beta", input(g, "beta", {4, 2}));
      }
      if (bwd) p.emplace_back("d_o", input(g, "d_o", {4, 2, 2}));
      for (auto& [port, t] : g.op(rule + (bwd ? "_bwd" : ""), p)) t.set_output(true);
      expect_reference_plan(g, bwd ? "linear_attention_bwd" : "linear_attention");
    }
  }
  {
    Graph g("composite");
    Tensor w = input(g, "w", {4, 4});
    Tensor q = g.matmul(input(g, "x", {5, 2, 4}), w);
    g.op("sdpa", sdpa_ports(g, q)).at("o").set_output(true);
    expect_reference_plan(g, "composite");
  }
}

TEST(ReferenceEnginePlanning, ReplayedConfigRunsTheSameWay) {
  Graph g("replay");
  Tensor a = input(g, "a", {5});
  Tensor y = g.pointwise("softplus", a);
  y.set_output(true);
  const int64_t id = engines::builtin_manifest().engine_id("pointwise", 0);
  plan::ExecutionPlans plans = engines::create_execution_plan(g, kCpu, id);
  ASSERT_EQ(plans.count(), 1);
  EXPECT_EQ(plans.name_at(0), "reference");
  EXPECT_EQ(plans.build_plans(), 0);
  Array av = random({5}, -3, 3), o = poisoned(y);
  execute(plans, {{a, av}, {y, o}});
  std::vector<double> want;
  for (double x : values(av)) want.push_back(softplus(x));
  expect_all_near(values(o), want, 1e-6);
}

TEST(ReferenceEnginePlanning, OnePlanRunsOnSeveralThreadsWithTheirOwnPacks) {
  Graph g("threads");
  Tensor x = input(g, "x", {4, 16});
  Tensor y = g.op("softmax", {{"x", g.pointwise("tanh", x)}}).at("y");
  y.set_output(true);
  const plan::ExecutionPlans plans = build(g);
  constexpr int kThreads = 4;
  std::vector<Array> xs, outs;
  for (int i = 0; i < kThreads; ++i) {
    xs.push_back(random({4, 16}, -2, 2));
    outs.push_back(poisoned(y));
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i)
    threads.emplace_back([&, i] {
      const plan::VariantPack pack = pack_of(plans, {{x, xs[i]}, {y, outs[i]}});
      for (int rep = 0; rep < 20; ++rep) plans.execute(pack, {});
    });
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < kThreads; ++i) {
    test::Dense t = to_dense(xs[i]);
    for (double& v : t.data) v = std::tanh(v);
    expect_all_near(values(outs[i]), test::oracle::softmax(t, -1, false).data, 1e-6);
  }
}

// ---- pointwise ops -------------------------------------------------------------------------

TEST(ReferenceEnginePointwise, EveryOpOfTheTableMatchesStdMathInF32) {
  const Shape shape = {3, 7};
  const auto n = static_cast<std::size_t>(numel(shape));
  int tested = 0;
  for (const op::OpSchema* schema : op::all_ops()) {
    if (schema->kind != op::OpKind::pointwise) continue;
    const std::string& name = schema->name;
    SCOPED_TRACE(name);
    const test::oracle::Pointwise* ref = test::oracle::pointwise(name);
    if (!ref) {
      ADD_FAILURE() << "no formula in tests/support/oracles/pointwise.cpp for pointwise op "
                    << name;
      continue;
    }
    const bool boolean = test::oracle::yields_boolean(name);

    // Inputs in the op's domain; comparisons and logic also see equal values and zeros.
    std::map<std::string, std::vector<double>> in;
    in["a"] = random_values(n, ref->a.lo, ref->a.hi);
    in["b"] = random_values(n, ref->b.lo, ref->b.hi);
    in["cond"] = random_values(n);
    for (double& c : in["cond"]) c = c > 0;
    if (boolean) {
      for (std::size_t i = 0; i < n; i += 2) in["b"][i] = in["a"][i];
      for (std::size_t i = 0; i < n; i += 3) in["a"][i] = 0;
      for (std::size_t i = 0; i < n; i += 4) in["b"][i] = 0;
    }

    Graph g("pw_" + name);
    Ports ports;
    Bindings bind;
    std::vector<std::vector<double>> args;  // as the f32 (or bool) arrays hold them
    for (const op::InputPort& p : schema->inputs) {
      const DType dt = p.name == "cond" ? DType::boolean : DType::f32;
      Tensor t = input(g, p.name, {shape[0], shape[1]}, dt);
      Array a = array(in[p.name], shape, dt);
      ports.emplace_back(p.name, t);
      bind.emplace_back(t, a);
      args.push_back(values(a));
    }
    Attrs attrs;
    if (name == "cast") attrs.emplace_back("dtype", DType::f64);
    Tensor out = g.op(name, ports, attrs).at("out");
    out.set_output(true);
    const DType want_dtype = boolean ? DType::boolean : name == "cast" ? DType::f64 : DType::f32;
    EXPECT_EQ(out.dtype(), want_dtype);

    Array o = poisoned(out);
    bind.emplace_back(out, o);
    execute(build(g), bind);

    std::vector<double> want(n);
    for (std::size_t i = 0; i < n; ++i) {
      std::vector<double> x;
      for (const auto& arg : args) x.push_back(arg[i]);
      want[i] = ref->f(x);
    }
    if (want_dtype == DType::boolean) {
      const auto* bytes = static_cast<const uint8_t*>(o.data());
      for (std::size_t i = 0; i < n; ++i)
        EXPECT_EQ(bytes[i], want[i] != 0 ? 1 : 0) << "element " << i << " (a booleans byte)";
    } else {
      expect_all_near(values(o), want, want_dtype == DType::f64 ? 0 : 1e-6);
    }
    ++tested;
  }
  EXPECT_GE(tested, 40);
}

TEST(ReferenceEnginePointwise, BroadcastsOperands) {
  {
    Graph g("bcast");
    Tensor a = input(g, "a", {3, 1}), b = input(g, "b", {1, 4});
    Tensor out = g.pointwise("add", a, b);
    out.set_output(true);
    EXPECT_EQ(out.dims(), (op::Dims{3, 4}));
    Array av = array({1, 2, 3}, {3, 1}), bv = array({10, 20, 30, 40}, {1, 4});
    Array o = poisoned(out);
    execute(build(g), {{a, av}, {b, bv}, {out, o}});
    EXPECT_EQ(values(o), (std::vector<double>{11, 21, 31, 41, 12, 22, 32, 42, 13, 23, 33, 43}));
  }
  {
    // Rank promotion: b [4] against a [2, 3, 4]; where with cond [3, 1].
    Graph g("bcast2");
    Tensor a = input(g, "a", {2, 3, 4}), b = input(g, "b", {4});
    Tensor c = input(g, "c", {3, 1}, DType::boolean);
    Tensor prod = g.pointwise("mul", a, b);
    Tensor out = g.where(c, prod, a);
    out.set_output(true);
    Array av = random({2, 3, 4}), bv = random({4}), cv = array({1, 0, 1}, {3, 1}, DType::boolean);
    Array o = poisoned(out);
    execute(build(g), {{a, av}, {b, bv}, {c, cv}, {out, o}});
    const auto x = values(av), y = values(bv);
    std::vector<double> want(24);
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        for (int k = 0; k < 4; ++k) {
          const int e = (i * 3 + j) * 4 + k;
          want[e] = j != 1 ? static_cast<float>(x[e] * y[k]) : x[e];
        }
    EXPECT_EQ(values(o), want);
  }
}

TEST(ReferenceEnginePointwise, CastToI32Truncates) {
  Graph g("cast");
  Tensor a = input(g, "a", {8});
  Tensor out = g.pointwise("cast", a, {{"dtype", DType::i32}});
  out.set_output(true);
  ASSERT_EQ(out.dtype(), DType::i32);
  Array av = array({-2.7, -0.5, 0.5, 2.9, 7.0, -7.99, 123.999, -0.0}, {8});
  Array o = poisoned(out);
  execute(build(g), {{a, av}, {out, o}});
  EXPECT_EQ(o.to_vector<int32_t>(), (std::vector<int32_t>{-2, 0, 0, 2, 7, -7, 123, 0}));
}

TEST(ReferenceEnginePointwise, BooleanInputsReadAnyNonzeroByteAsTrue) {
  // Boolean storage from DLPack or wrap may hold any non-zero byte for true (as Array reads it).
  Graph g("bool_bytes");
  Tensor c = input(g, "c", {5}, DType::boolean);
  Tensor f = g.pointwise("cast", c, {{"dtype", DType::f32}});
  f.set_output(true);
  Tensor n = g.pointwise("logical_not", c);
  n.set_output(true);
  std::vector<uint8_t> bytes = {0, 1, 2, 0xAB, 0xFF};
  Array cv = Array::wrap(bytes.data(), {5}, DType::boolean, kCpu);
  Array fo = poisoned(f), no = poisoned(n);
  execute(build(g), {{c, cv}, {f, fo}, {n, no}});
  EXPECT_EQ(values(fo), (std::vector<double>{0, 1, 1, 1, 1}));
  EXPECT_EQ(values(no), (std::vector<double>{1, 0, 0, 0, 0}));
  const auto* out = static_cast<const uint8_t*>(no.data());
  for (int i = 0; i < 5; ++i) EXPECT_LE(out[i], 1) << "byte " << i;
}

TEST(ReferenceEnginePointwise, SixteenBitInputsRoundResultsToTheirDtype) {
  const Shape shape = {4, 6};
  for (DType dt : {DType::f16, DType::bf16}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    const std::vector<std::pair<std::string, std::function<double(double, double)>>> ops = {
        {"add", [](double a, double b) { return a + b; }},
        {"mul", [](double a, double b) { return a * b; }},
        {"exp", [](double a, double) { return std::exp(a); }},
        {"tanh", [](double a, double) { return std::tanh(a); }},
        {"sigmoid", [](double a, double) { return sigmoid(a); }},
        {"square", [](double a, double) { return a * a; }},
    };
    for (const auto& [name, f] : ops) {
      SCOPED_TRACE(name);
      const bool binary = name == "add" || name == "mul";
      Graph g("half_" + name);
      Tensor a = input(g, "a", {4, 6}, dt), b;
      if (binary) b = input(g, "b", {4, 6}, dt);
      Tensor out = binary ? g.pointwise(name, a, b) : g.pointwise(name, a);
      out.set_output(true);
      ASSERT_EQ(out.dtype(), dt);
      Array av = random(shape, -2, 2, dt), bv = random(shape, -2, 2, dt);
      Array o = poisoned(out);
      Bindings bind = {{a, av}, {out, o}};
      if (binary) bind.emplace_back(b, bv);
      execute(build(g), bind);
      const auto x = values(av), y = values(bv), got = values(o);
      std::vector<double> want(x.size()), rounded(x.size());
      for (std::size_t i = 0; i < x.size(); ++i) want[i] = f(x[i], y[i]);
      expect_all_near(got, want, tolerance(dt));
      // The result is the formula rounded once to the dtype.
      EXPECT_EQ(got, values(array(want, shape, dt)));
    }
  }
}

TEST(ReferenceEnginePointwise, IntermediatesAreRoundedToTheirDeclaredDtype) {
  for (DType mid : {DType::f16, DType::bf16}) {
    Graph g("round_trip");
    Tensor x = input(g, "x", {16});
    Tensor h = g.pointwise("cast", x, {{"dtype", mid}});
    Tensor y = g.pointwise("cast", h, {{"dtype", DType::f32}});
    y.set_output(true);
    Array xv = random({16}, -3, 3);
    Array o = poisoned(y);
    execute(build(g), {{x, xv}, {y, o}});
    const auto want = values(array(values(xv), {16}, mid));
    EXPECT_EQ(values(o), want);
    EXPECT_NE(values(o), values(xv));  // rounding really happened
  }
}

// ---- multi-node graphs ---------------------------------------------------------------------

TEST(ReferenceEngineGraphs, VirtualIntermediatesEqualTheFormula) {
  Graph g("fused");
  Tensor a = input(g, "a", {4, 5}), b = input(g, "b", {4, 5}), c = input(g, "c", {4, 5});
  Tensor y = g.pointwise("relu", g.pointwise("add", g.pointwise("mul", a, b), c));
  y.set_output(true);
  plan::ExecutionPlans plans = build(g);
  EXPECT_EQ(plans.layout().size(), 4);  // a, b, c, y: the intermediates are no operands
  Array av = random({4, 5}), bv = random({4, 5}), cv = random({4, 5});
  Array o = poisoned(y);
  execute(plans, {{a, av}, {b, bv}, {c, cv}, {y, o}});
  const auto x = values(av), w = values(bv), z = values(cv);
  std::vector<double> want(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) want[i] = std::max(x[i] * w[i] + z[i], 0.0);
  expect_all_near(values(o), want, 1e-6);
}

TEST(ReferenceEngineGraphs, IntermediateOutputsAreWrittenToo) {
  Graph g("two_outputs");
  Tensor a = input(g, "a", {3, 4}), b = input(g, "b", {3, 4});
  Tensor t = g.pointwise("mul", a, b);
  t.set_output(true);
  Tensor s = g.op("reduction", {{"x", t}}, {{"mode", "sum"}, {"axes", {1}}}).at("y");
  Tensor y = g.pointwise("exp", s);
  y.set_output(true);
  Array av = random({3, 4}), bv = random({3, 4});
  Array to = poisoned(t), yo = poisoned(y);
  execute(build(g), {{a, av}, {b, bv}, {t, to}, {y, yo}});
  const auto x = values(av), w = values(bv);
  std::vector<double> prod(12), want(3, 0.0);
  for (int i = 0; i < 12; ++i) prod[i] = x[i] * w[i];
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 4; ++j) want[i] += static_cast<float>(prod[i * 4 + j]);
    want[i] = std::exp(want[i]);
  }
  expect_all_near(values(to), prod, 1e-6);
  expect_all_near(values(yo), want, 1e-6);
}

// ---- strided operands ----------------------------------------------------------------------

TEST(ReferenceEngineStrides, TransposedViewsEqualContiguousCopies) {
  Graph g("strided");
  Tensor a = input(g, "a", {4, 3}), b = input(g, "b", {4, 3});
  Tensor out = g.pointwise("sub", a, b);
  out.set_output(true);
  plan::ExecutionPlans plans = build(g);

  // a is the transpose of a row-major [3, 4] buffer: a[i][j] = m[j][i].
  std::vector<float> m(12);
  for (std::size_t i = 0; i < m.size(); ++i) m[i] = static_cast<float>(random_values(1)[0]);
  Array a_view = Array::wrap(m.data(), {4, 3}, DType::f32, kCpu, {1, 4});
  ASSERT_FALSE(a_view.is_contiguous());
  Array a_copy = a_view.to(kCpu);
  ASSERT_TRUE(a_copy.is_contiguous());
  Array bv = random({4, 3});

  Array o_view_result = poisoned(out), o_copy_result = poisoned(out);
  execute(plans, {{a, a_view}, {b, bv}, {out, o_view_result}});
  execute(plans, {{a, a_copy}, {b, bv}, {out, o_copy_result}});
  EXPECT_EQ(values(o_view_result), values(o_copy_result));
  const auto bx = values(bv);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j)
      EXPECT_EQ(values(o_view_result)[i * 3 + j], static_cast<float>(m[j * 4 + i] - bx[i * 3 + j]));

  // A strided output: written through its strides; a padded one leaves its gaps alone.
  std::vector<float> t_out(12, std::nanf(""));
  Array o_t = Array::wrap(t_out.data(), {4, 3}, DType::f32, kCpu, {1, 4});
  execute(plans, {{a, a_copy}, {b, bv}, {out, o_t}});
  EXPECT_EQ(values(o_t), values(o_copy_result));
  std::vector<float> padded(4 * 5, -5.0f);
  Array o_p = Array::wrap(padded.data(), {4, 3}, DType::f32, kCpu, {5, 1});
  execute(plans, {{a, a_view}, {b, bv}, {out, o_p}});
  EXPECT_EQ(values(o_p), values(o_copy_result));
  for (int i = 0; i < 4; ++i)
    for (int j = 3; j < 5; ++j) EXPECT_EQ(padded[i * 5 + j], -5.0f) << "gap " << i << "," << j;
}

TEST(ReferenceEngineStrides, StridedMatmulOperandEqualsTheFormula) {
  Graph g("mm_strided");
  Tensor a = input(g, "a", {2, 3}, DType::f64), b = input(g, "b", {3, 4}, DType::f64);
  Tensor c = g.matmul(a, b);
  c.set_output(true);
  std::vector<double> bt = random_values(12);  // b^T, row-major [4, 3]
  Array b_view = Array::wrap(bt.data(), {3, 4}, DType::f64, kCpu, {1, 3});
  Array av = random({2, 3}, -1, 1, DType::f64);
  Array o = poisoned(c);
  execute(build(g), {{a, av}, {b, b_view}, {c, o}});
  test::Dense b_rows({3, 4});  // b[k][j] = bt[j][k]
  for (int k = 0; k < 3; ++k)
    for (int j = 0; j < 4; ++j) b_rows.data[k * 4 + j] = bt[j * 3 + k];
  expect_all_near(values(o), test::oracle::matmul(to_dense(av), b_rows).data, 1e-14);
}

// ---- structured ops ------------------------------------------------------------------------

TEST(ReferenceEngineStructured, ReductionsOverAxesWithKeepdim) {
  struct Case {
    std::string mode;
    std::vector<int64_t> axes;
    bool keepdim;
    op::Dims dims;
  };
  const std::vector<Case> cases = {
      {"sum", {1}, true, {2, 1, 4}},  {"mean", {0, 2}, false, {3}},
      {"max", {-1}, false, {2, 3}},   {"sum", {}, false, {}},
      {"mean", {2}, true, {2, 3, 1}}, {"max", {0, 1}, true, {1, 1, 4}},
      {"min", {1}, false, {2, 4}},    {"prod", {2}, false, {2, 3}},
      {"l2", {0, 1}, false, {4}},     {"amax", {}, true, {1, 1, 1}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.mode + " keepdim " + std::to_string(c.keepdim));
    Graph g("reduce");
    Tensor x = input(g, "x", {2, 3, 4}, DType::f64);
    Tensor y =
        g.op("reduction", {{"x", x}}, {{"mode", c.mode}, {"axes", c.axes}, {"keepdim", c.keepdim}})
            .at("y");
    y.set_output(true);
    ASSERT_EQ(y.dims(), c.dims);
    Array xv = random({2, 3, 4}, -1, 1, DType::f64);
    Array o = poisoned(y);
    execute(build(g), {{x, xv}, {y, o}});
    const auto want = test::oracle::reduce(to_dense(xv), c.mode, c.axes, c.keepdim).data;
    expect_all_near(values(o), want, 1e-14);
  }
}

TEST(ReferenceEngineStructured, SoftmaxAndLogSoftmax) {
  for (bool log : {false, true}) {
    for (int64_t axis : {-1, 0}) {
      SCOPED_TRACE("log " + std::to_string(log) + " axis " + std::to_string(axis));
      Graph g("softmax");
      Tensor x = input(g, "x", {3, 5});
      Tensor y = g.op("softmax", {{"x", x}}, {{"axis", axis}, {"log", log}}).at("y");
      y.set_output(true);
      Array xv = random({3, 5}, -4, 4);
      Array o = poisoned(y);
      execute(build(g), {{x, xv}, {y, o}});
      expect_all_near(values(o), test::oracle::softmax(to_dense(xv), axis, log).data, 1e-6);
    }
  }
  // Hand-computed: softmax(0, ln 3) = (1/4, 3/4).
  Graph g("softmax_hand");
  Tensor x = input(g, "x", {2}, DType::f64);
  Tensor y = g.op("softmax", {{"x", x}}).at("y");
  y.set_output(true);
  Array o = poisoned(y);
  execute(build(g), {{x, array({0, std::log(3.0)}, {2}, DType::f64)}, {y, o}});
  expect_all_near(values(o), {0.25, 0.75}, 1e-15);
}

TEST(ReferenceEngineStructured, LayerNormWithTrainingStatistics) {
  const int64_t rows = 3, n = 8;
  const double eps = 1e-3;
  Graph g("ln");
  Tensor x = input(g, "x", {rows, n}), scale = input(g, "scale", {n}), bias = input(g, "bias", {n});
  auto outs = g.op("layer_norm", {{"x", x}, {"scale", scale}, {"bias", bias}},
                   {{"epsilon", eps}, {"training", true}});
  Tensor y = outs.at("y"), mean = outs.at("mean"), inv = outs.at("inv_variance");
  for (Tensor t : {y, mean, inv}) t.set_output(true);
  EXPECT_EQ(mean.dims(), (op::Dims{rows}));
  EXPECT_EQ(inv.dtype(), DType::f32);
  Array xv = random({rows, n}, -2, 3), sv = random({n}), bv = random({n});
  Array yo = poisoned(y), mo = poisoned(mean), io = poisoned(inv);
  execute(build(g), {{x, xv}, {scale, sv}, {bias, bv}, {y, yo}, {mean, mo}, {inv, io}});
  const test::Dense s = to_dense(sv), b = to_dense(bv);
  const auto want = test::oracle::layer_norm(to_dense(xv), &s, &b, 1, eps);
  expect_all_near(values(yo), want.y.data, 1e-6);
  expect_all_near(values(mo), want.mean.data, 1e-6);
  expect_all_near(values(io), want.inv.data, 1e-6);
}

TEST(ReferenceEngineStructured, RmsNormOverTwoTrailingDims) {
  Graph g("rms");
  Tensor x = input(g, "x", {2, 3, 4}, DType::f64), scale = input(g, "scale", {3, 4}, DType::f64);
  auto outs =
      g.op("rms_norm", {{"x", x}, {"scale", scale}}, {{"normalized_ndim", 2}, {"training", true}});
  Tensor y = outs.at("y"), inv = outs.at("inv_rms");
  y.set_output(true);
  inv.set_output(true);
  Array xv = random({2, 3, 4}, -1, 1, DType::f64), sv = random({3, 4}, -1, 1, DType::f64);
  Array yo = poisoned(y), io = poisoned(inv);
  execute(build(g), {{x, xv}, {scale, sv}, {y, yo}, {inv, io}});
  const test::Dense s = to_dense(sv);
  const auto want = test::oracle::rms_norm(to_dense(xv), &s, nullptr, 2, 1e-5);  // default eps
  expect_all_near(values(yo), want.y.data, 1e-13);
  expect_all_near(values(io), want.inv.data, 1e-13);
}

TEST(ReferenceEngineStructured, MatmulWithBiasAndBatchBroadcast) {
  // a [2, 1, 3, 4] @ b [3, 4, 5] + bias [5] -> c [2, 3, 3, 5].
  Graph g("matmul");
  Tensor a = input(g, "a", {2, 1, 3, 4}), b = input(g, "b", {3, 4, 5}),
         bias = input(g, "bias", {5});
  Tensor c = g.matmul(a, b, bias);
  c.set_output(true);
  ASSERT_EQ(c.dims(), (op::Dims{2, 3, 3, 5}));
  Array av = random({2, 1, 3, 4}), bv = random({3, 4, 5}), biasv = random({5});
  Array o = poisoned(c);
  execute(build(g), {{a, av}, {b, bv}, {bias, biasv}, {c, o}});
  const test::Dense z = to_dense(biasv);
  expect_all_near(values(o), test::oracle::matmul(to_dense(av), to_dense(bv), &z).data, 1e-6);
}

TEST(ReferenceEngineStructured, EmbeddingPicksRowsAndRefusesOutOfRangeIds) {
  Graph g("embedding");
  Tensor table = input(g, "table", {6, 3}), ids = input(g, "ids", {2, 3}, DType::i32);
  Tensor y = g.op("embedding", {{"table", table}, {"ids", ids}}).at("y");
  y.set_output(true);
  ASSERT_EQ(y.dims(), (op::Dims{2, 3, 3}));
  const plan::ExecutionPlans plans = build(g);
  Array tv = random({6, 3});
  const std::vector<double> id = {5, 0, 3, 3, 1, 2};
  Array o = sentinel(y);
  execute(plans, {{table, tv}, {ids, array(id, {2, 3}, DType::i32)}, {y, o}});
  const auto t = values(tv);
  std::vector<double> want;
  for (double i : id)
    for (int j = 0; j < 3; ++j) want.push_back(t[static_cast<int>(i) * 3 + j]);
  expect_all_near(values(o), want, 0);
  // An id naming no row is refused (like torch), the output untouched.
  Array untouched = sentinel(y);
  expect_throw_with<InvalidArgument>(
      [&] {
        execute(
            plans,
            {{table, tv}, {ids, array({5, 0, 3, 3, -1, 6}, {2, 3}, DType::i32)}, {y, untouched}});
      },
      {"embedding", "ids element 4 = -1", "outside [0, 6)"});
  EXPECT_TRUE(all_equal(untouched, 777));
}

TEST(ReferenceEngineStructured, CrossEntropyMeanWithIgnoreIndex) {
  const int64_t rows = 5, classes = 4;
  const std::vector<double> targets = {2, -100, 0, 3, -100};
  for (const std::string reduction : {"mean", "sum", "none"}) {
    for (double smoothing : {0.0, 0.2}) {
      SCOPED_TRACE(reduction + ", label_smoothing " + std::to_string(smoothing));
      Graph g("ce");
      Tensor logits = input(g, "logits", {rows, classes}),
             tg = input(g, "targets", {rows}, DType::i64);
      auto outs =
          g.op("cross_entropy", {{"logits", logits}, {"targets", tg}},
               {{"output_lse", true}, {"label_smoothing", smoothing}, {"reduction", reduction}});
      Tensor loss = outs.at("loss"), lse = outs.at("lse");
      loss.set_output(true);
      lse.set_output(true);
      EXPECT_EQ(loss.dims(), reduction == "none" ? op::Dims{rows} : op::Dims{});
      Array lv = random({rows, classes}, -3, 3);
      Array lo = poisoned(loss), so = poisoned(lse);
      execute(build(g),
              {{logits, lv}, {tg, array(targets, {rows}, DType::i64)}, {loss, lo}, {lse, so}});
      const auto want = test::oracle::cross_entropy(to_dense(lv), {targets.begin(), targets.end()},
                                                    -100, smoothing, reduction);
      expect_all_near(values(lo), want.loss.data, 1e-6);
      expect_all_near(values(so), want.lse.data, 1e-6);
    }
  }
}

// ---- sdpa ----------------------------------------------------------------------------------

struct AttnDims {
  int64_t h, hk, d, dv;
};

using test::oracle::Sequences;

struct SdpaGraph {
  Graph g{"sdpa"};
  Tensor q, k, v, cu_q, cu_kv, o, stats;
};

// THD when `batch` > 0 (cu_seqlens of batch + 1 entries), dense BSHD when 0.
SdpaGraph sdpa_graph(const op::Dims& qd, const op::Dims& kd, const op::Dims& vd, DType dt,
                     int64_t batch, bool causal, bool stats, std::optional<double> scale = {},
                     const Attrs& extra = {}) {
  SdpaGraph s;
  s.q = input(s.g, "q", qd, dt);
  s.k = input(s.g, "k", kd, dt);
  s.v = input(s.g, "v", vd, dt);
  Ports p = {{"q", s.q}, {"k", s.k}, {"v", s.v}};
  if (batch > 0) {
    s.cu_q = input(s.g, "cu_q", {batch + 1}, DType::i32);
    s.cu_kv = input(s.g, "cu_kv", {batch + 1}, DType::i32);
    p.emplace_back("cu_seqlens_q", s.cu_q);
    p.emplace_back("cu_seqlens_kv", s.cu_kv);
  }
  Attrs attrs = {{"causal", causal}, {"generate_stats", stats}};
  if (scale) attrs.emplace_back("scale", *scale);
  attrs.insert(attrs.end(), extra.begin(), extra.end());
  auto outs = s.g.op("sdpa", p, attrs);
  s.o = outs.at("o");
  s.o.set_output(true);
  if (stats) {
    s.stats = outs.at("stats");
    s.stats.set_output(true);
  }
  return s;
}

std::vector<double> as_doubles(const std::vector<int64_t>& v) {
  return {v.begin(), v.end()};
}

// ---- the backward ops of the structured table: the engine wires ports, attributes and
// conditional outputs to the reference gradients (tested against finite differences in
// tests/engines/reference/math/test_structured_grad_math.cpp).

TEST(ReferenceEngineStructuredGrad, SoftmaxBwdAndLogSoftmaxBwd) {
  for (bool log : {false, true}) {
    SCOPED_TRACE(log ? "log" : "softmax");
    Graph g("softmax_bwd");
    Tensor y = input(g, "y", {3, 7}, DType::f64), dy = input(g, "dy", {3, 7}, DType::f64);
    Tensor dx = g.op("softmax_bwd", {{"y", y}, {"dy", dy}}, {{"axis", 1}, {"log", log}}).at("dx");
    dx.set_output(true);
    Array yv = random({3, 7}, -1, 1, DType::f64), dyv = random({3, 7}, -1, 1, DType::f64);
    Array o = poisoned(dx);
    execute(build(g), {{y, yv}, {dy, dyv}, {dx, o}});
    expect_all_near(values(o), reference::softmax_bwd(to_dense(yv), to_dense(dyv), 1, log).data,
                    1e-13);
  }
}

TEST(ReferenceEngineStructuredGrad, NormBwdProducesEachConditionalOutput) {
  for (const std::string op : {"layer_norm_bwd", "rms_norm_bwd"})
    for (bool with_scale : {true, false}) {
      SCOPED_TRACE(op + (with_scale ? " with scale" : " without scale"));
      const bool centered = op == "layer_norm_bwd";
      Graph g(op);
      Tensor dy = input(g, "dy", {4, 6}, DType::f64), x = input(g, "x", {4, 6}, DType::f64);
      Tensor inv = input(g, centered ? "inv_variance" : "inv_rms", {4}, DType::f64);
      Tensor mean = centered ? input(g, "mean", {4}, DType::f64) : Tensor();
      Tensor scale = with_scale ? input(g, "scale", {6}, DType::f64) : Tensor();
      Ports ports = {{"dy", dy}, {"x", x}, {centered ? "inv_variance" : "inv_rms", inv}};
      if (centered) ports.emplace_back("mean", mean);
      if (with_scale) ports.emplace_back("scale", scale);
      auto outs = g.op(op, ports, {{"bias_grad", true}});
      EXPECT_EQ(outs.count("dscale"), with_scale ? 1u : 0u);
      ASSERT_EQ(outs.count("dbias"), 1u);
      for (auto& [name, t] : outs) t.set_output(true);
      Array dyv = random({4, 6}, -1, 1, DType::f64), xv = random({4, 6}, -2, 2, DType::f64);
      Array invv = random({4}, 0.5, 2, DType::f64), meanv = random({4}, -1, 1, DType::f64);
      Array sv = random({6}, -1, 1, DType::f64);
      Bindings b = {{dy, dyv}, {x, xv}, {inv, invv}};
      if (centered) b.emplace_back(mean, meanv);
      if (with_scale) b.emplace_back(scale, sv);
      std::map<std::string, Array> got;
      for (auto& [name, t] : outs) b.emplace_back(t, got[name] = poisoned(t));
      execute(build(g), b);
      const test::Dense md = to_dense(meanv), sd = to_dense(sv);
      const reference::NormGrads want =
          reference::norm_bwd(op, to_dense(dyv), to_dense(xv), centered ? &md : nullptr,
                              to_dense(invv), with_scale ? &sd : nullptr, 1, true);
      expect_all_near(values(got["dx"]), want.dx.data, 1e-13);
      expect_all_near(values(got["dbias"]), want.dbias.data, 1e-13);
      if (with_scale) expect_all_near(values(got["dscale"]), want.dscale.data, 1e-13);
    }
}

TEST(ReferenceEngineStructuredGrad, EmbeddingBwdSumsRepeatsAndRefusesOutOfRangeIds) {
  Graph g("embedding_bwd");
  Tensor dy = input(g, "dy", {2, 3, 4}), ids = input(g, "ids", {2, 3}, DType::i64);
  Tensor dt =
      g.op("embedding_bwd", {{"dy", dy}, {"ids", ids}}, {{"num_embeddings", 5}}).at("dtable");
  dt.set_output(true);
  ASSERT_EQ(dt.dims(), (op::Dims{5, 4}));
  const plan::ExecutionPlans plans = build(g);
  const std::vector<double> id = {4, 0, 4, 2, 4, 0};
  Array dyv = random({2, 3, 4}), o = poisoned(dt);
  execute(plans, {{dy, dyv}, {ids, array(id, {2, 3}, DType::i64)}, {dt, o}});
  expect_all_near(values(o), reference::embedding_bwd(to_dense(dyv), {4, 0, 4, 2, 4, 0}, 5).data,
                  1e-6);
  Array untouched = sentinel(dt);
  expect_throw_with<InvalidArgument>(
      [&] {
        execute(plans,
                {{dy, dyv}, {ids, array({4, 0, 5, 2, 4, 0}, {2, 3}, DType::i64)}, {dt, untouched}});
      },
      {"embedding_bwd", "ids element 2 = 5", "outside [0, 5)"});
  EXPECT_TRUE(all_equal(untouched, 777));
  Graph h("embedding_bwd without num_embeddings");
  expect_throw_with<InvalidArgument>(
      [&] {
        h.op("embedding_bwd",
             {{"dy", input(h, "dy", {2, 4})}, {"ids", input(h, "ids", {2}, DType::i64)}});
      },
      {"embedding_bwd", "num_embeddings"});
}

TEST(ReferenceEngineStructuredGrad, CrossEntropyBwdWithAndWithoutTheForwardsLse) {
  const std::vector<double> targets = {2, -100, 0, 3, 1};
  for (const std::string reduction : {"mean", "sum", "none"})
    for (bool with_lse : {false, true}) {
      SCOPED_TRACE(reduction + (with_lse ? " with lse" : ""));
      Graph g("ce_bwd");
      Tensor logits = input(g, "logits", {5, 4}, DType::f64),
             tg = input(g, "targets", {5}, DType::i64),
             dloss = input(g, "dloss", reduction == "none" ? op::Dims{5} : op::Dims{}, DType::f64);
      Tensor lse = with_lse ? input(g, "lse", {5}, DType::f64) : Tensor();
      Ports ports = {{"logits", logits}, {"targets", tg}, {"dloss", dloss}};
      if (with_lse) ports.emplace_back("lse", lse);
      Tensor d =
          g.op("cross_entropy_bwd", ports, {{"reduction", reduction}, {"label_smoothing", 0.1}})
              .at("dlogits");
      d.set_output(true);
      Array lv = random({5, 4}, -3, 3, DType::f64);
      Array dv = random(reduction == "none" ? Shape{5} : Shape{}, 0.5, 1.5, DType::f64);
      const test::Dense ld = to_dense(lv);
      const std::vector<int64_t> t(targets.begin(), targets.end());
      const reference::CrossEntropyOut fwd = reference::cross_entropy(ld, t, -100, 0.1, reduction);
      Array lsev = from_doubles(fwd.lse.data, {5}, DType::f64, kCpu);
      Array o = poisoned(d);
      Bindings b = {{logits, lv}, {tg, array(targets, {5}, DType::i64)}, {dloss, dv}, {d, o}};
      if (with_lse) b.emplace_back(lse, lsev);
      execute(build(g), b);
      expect_all_near(
          values(o),
          reference::cross_entropy_bwd(ld, t, to_dense(dv), nullptr, -100, 0.1, reduction).data,
          1e-13);
    }
}

TEST(ReferenceEngineSdpa, HandComputedCausalCase) {
  // One sequence, one head, D = 1, scale 1: scores of query 1 are (0, ln 2), so its weights are
  // (1/3, 2/3) and o = 3/3 + 12/3 = 5; query 0 sees key 0 only (o = 3, lse = 0).
  SdpaGraph s = sdpa_graph({2, 1, 1}, {2, 1, 1}, {2, 1, 1}, DType::f64, 1, true, true, 1.0);
  Array o = poisoned(s.o), st = poisoned(s.stats);
  execute(build(s.g), {{s.q, array({1, 1}, {2, 1, 1}, DType::f64)},
                       {s.k, array({0, std::log(2.0)}, {2, 1, 1}, DType::f64)},
                       {s.v, array({3, 6}, {2, 1, 1}, DType::f64)},
                       {s.cu_q, array({0, 2}, {2}, DType::i32)},
                       {s.cu_kv, array({0, 2}, {2}, DType::i32)},
                       {s.o, o},
                       {s.stats, st}});
  expect_all_near(values(o), {3, 5}, 1e-15);
  expect_all_near(values(st), {0, std::log(3.0)}, 1e-7);  // stats are f32
}

TEST(ReferenceEngineSdpa, ThdWithCuSeqlensMatchesDenseFormula) {
  const AttnDims s{4, 2, 4, 3};  // GQA: two query heads per kv head; Dv != D
  const std::vector<int64_t> cu_q = {0, 2, 5, 6}, cu_kv = {0, 3, 6, 9};
  const int64_t tq = cu_q.back(), tk = cu_kv.back();
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "full");
    SdpaGraph gr =
        sdpa_graph({tq, s.h, s.d}, {tk, s.hk, s.d}, {tk, s.hk, s.dv}, DType::f32, 3, causal, true);
    Array qv = random({tq, s.h, s.d}, -2, 2), kv = random({tk, s.hk, s.d}, -2, 2),
          vv = random({tk, s.hk, s.dv});
    Array o = poisoned(gr.o), st = poisoned(gr.stats);
    execute(build(gr.g), {{gr.q, qv},
                          {gr.k, kv},
                          {gr.v, vv},
                          {gr.cu_q, array(as_doubles(cu_q), {4}, DType::i32)},
                          {gr.cu_kv, array(as_doubles(cu_kv), {4}, DType::i32)},
                          {gr.o, o},
                          {gr.stats, st}});
    const auto want =
        test::oracle::sdpa(to_dense(qv), to_dense(kv), to_dense(vv),
                           Sequences::from_cu(cu_q, cu_kv), 1 / std::sqrt(4.0), causal);
    expect_all_near(values(o), want.o.data, 1e-5);
    expect_all_near(values(st), want.lse.data, 1e-5);
  }
}

// FlashAttention's max_seqlen: a bound the batch keeps changes nothing; a longer sequence is
// refused by name (engines may size their grids by the bound) and the outputs stay untouched.
TEST(ReferenceEngineSdpa, MaxSeqlenIsABoundTheBatchMustKeep) {
  const AttnDims s{2, 1, 4, 4};
  const std::vector<int64_t> cu_q = {0, 2, 5, 6}, cu_kv = {0, 3, 6, 9};  // longest: 3 and 3
  const int64_t tq = cu_q.back(), tk = cu_kv.back();
  Array qv = random({tq, s.h, s.d}, -2, 2), kv = random({tk, s.hk, s.d}, -2, 2),
        vv = random({tk, s.hk, s.dv});
  const auto run = [&](const Attrs& bounds, Array& o) {
    SdpaGraph gr = sdpa_graph({tq, s.h, s.d}, {tk, s.hk, s.d}, {tk, s.hk, s.dv}, DType::f32, 3,
                              true, false, {}, bounds);
    o = sentinel(gr.o);
    execute(build(gr.g), {{gr.q, qv},
                          {gr.k, kv},
                          {gr.v, vv},
                          {gr.cu_q, array(as_doubles(cu_q), {4}, DType::i32)},
                          {gr.cu_kv, array(as_doubles(cu_kv), {4}, DType::i32)},
                          {gr.o, o}});
  };
  Array free, bounded;
  run({}, free);
  run({{"max_seqlen_q", 3}, {"max_seqlen_kv", 3}}, bounded);
  EXPECT_TRUE(all_finite(free));
  expect_all_near(values(bounded), values(free), 0.0);
  Array refused;
  expect_throw_with<InvalidArgument>(
      [&] {
        run({{"max_seqlen_q", 2}}, refused);
      },
      {"sequence 1 of cu_seqlens_q has 3 rows", "over max_seqlen_q = 2"});
  EXPECT_TRUE(all_equal(refused, 777));
  expect_throw_with<InvalidArgument>(
      [&] {
        run({{"max_seqlen_kv", 2}}, refused);
      },
      {"sequence 0 of cu_seqlens_kv has 3 rows", "over max_seqlen_kv = 2"});
}

TEST(ReferenceEngineSdpa, DenseBshdEqualsTheSameDataPackedAsThd) {
  const int64_t b = 2, sq = 3, sk = 4, h = 2, hk = 1, d = 4;
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "full");
    Array qv = random({b, sq, h, d}), kv = random({b, sk, hk, d}), vv = random({b, sk, hk, d});
    SdpaGraph dense =
        sdpa_graph({b, sq, h, d}, {b, sk, hk, d}, {b, sk, hk, d}, DType::f32, 0, causal, true, 0.7);
    Array o_dense = poisoned(dense.o), st_dense = poisoned(dense.stats);
    execute(
        build(dense.g),
        {{dense.q, qv}, {dense.k, kv}, {dense.v, vv}, {dense.o, o_dense}, {dense.stats, st_dense}});
    EXPECT_EQ(st_dense.shape(), (Shape{b, sq, h}));

    SdpaGraph thd = sdpa_graph({b * sq, h, d}, {b * sk, hk, d}, {b * sk, hk, d}, DType::f32, b,
                               causal, true, 0.7);
    Array o_thd = poisoned(thd.o), st_thd = poisoned(thd.stats);
    execute(build(thd.g), {{thd.q, qv.reshape({b * sq, h, d})},
                           {thd.k, kv.reshape({b * sk, hk, d})},
                           {thd.v, vv.reshape({b * sk, hk, d})},
                           {thd.cu_q, array({0, 3, 6}, {3}, DType::i32)},
                           {thd.cu_kv, array({0, 4, 8}, {3}, DType::i32)},
                           {thd.o, o_thd},
                           {thd.stats, st_thd}});
    EXPECT_EQ(values(o_dense), values(o_thd));
    EXPECT_EQ(values(st_dense), values(st_thd));
    const auto want = test::oracle::sdpa(to_dense(qv.reshape({b * sq, h, d})),
                                         to_dense(kv.reshape({b * sk, hk, d})),
                                         to_dense(vv.reshape({b * sk, hk, d})),
                                         Sequences::from_cu({0, 3, 6}, {0, 4, 8}), 0.7, causal);
    expect_all_near(values(o_dense), want.o.data, 1e-5);
  }
}

// Copies rows [from, from + len) of a packed [T, H, C] tensor to rows starting at `to`.
void copy_rows(const std::vector<double>& src, std::vector<double>& dst, int64_t row, int64_t from,
               int64_t to, int64_t len) {
  for (int64_t i = 0; i < len * row; ++i) dst[to * row + i] = src[from * row + i];
}

TEST(ReferenceEngineSdpa, RaggedOffsetsEqualTheGapFreePacking) {
  const int64_t h = 2, hk = 2, d = 4, dv = 2;
  const std::vector<int64_t> cu_q = {0, 2, 5}, cu_kv = {0, 3, 7};
  // Stored with gaps: q sequences at rows 1 and 4 of 8; k/v sequences at rows 0 and 5 of 10.
  const std::vector<int64_t> q_rows = {1, 4}, kv_rows = {0, 5};
  const int64_t tq_store = 8, tk_store = 10;
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "full");
    Array qv = random({5, h, d}), kv = random({7, hk, d}), vv = random({7, hk, dv});
    SdpaGraph packed = sdpa_graph({5, h, d}, {7, hk, d}, {7, hk, dv}, DType::f32, 2, causal, true);
    Array o_packed = poisoned(packed.o), st_packed = poisoned(packed.stats);
    const Array cuq = array(as_doubles(cu_q), {3}, DType::i32),
                cukv = array(as_doubles(cu_kv), {3}, DType::i32);
    execute(build(packed.g), {{packed.q, qv},
                              {packed.k, kv},
                              {packed.v, vv},
                              {packed.cu_q, cuq},
                              {packed.cu_kv, cukv},
                              {packed.o, o_packed},
                              {packed.stats, st_packed}});

    // The same sequences placed with gaps that hold junk a reader must never touch.
    std::vector<double> qs(tq_store * h * d, 1e6), ks(tk_store * hk * d, 1e6),
        vs(tk_store * hk * dv, 1e6);
    for (int b = 0; b < 2; ++b) {
      copy_rows(values(qv), qs, h * d, cu_q[b], q_rows[b], cu_q[b + 1] - cu_q[b]);
      copy_rows(values(kv), ks, hk * d, cu_kv[b], kv_rows[b], cu_kv[b + 1] - cu_kv[b]);
      copy_rows(values(vv), vs, hk * dv, cu_kv[b], kv_rows[b], cu_kv[b + 1] - cu_kv[b]);
    }
    SdpaGraph ragged = sdpa_graph({tq_store, h, d}, {tk_store, hk, d}, {tk_store, hk, dv},
                                  DType::f32, 2, causal, true);
    Tensor q_off = input(ragged.g, "q_off", {3}, DType::i64);
    Tensor k_off = input(ragged.g, "k_off", {3}, DType::i64);
    Tensor v_off = input(ragged.g, "v_off", {3}, DType::i64);
    ragged.q.set_ragged_offset(q_off);
    ragged.k.set_ragged_offset(k_off);
    ragged.v.set_ragged_offset(v_off);
    plan::ExecutionPlans plans = build(ragged.g);
    const auto offsets = [](const std::vector<int64_t>& rows, int64_t row, int64_t end) {
      return array({static_cast<double>(rows[0] * row), static_cast<double>(rows[1] * row),
                    static_cast<double>(end * row)},
                   {3}, DType::i64);
    };
    Array o_ragged = poisoned(ragged.o), st_ragged = poisoned(ragged.stats);
    execute(plans, {{ragged.q, array(qs, {tq_store, h, d})},
                    {ragged.k, array(ks, {tk_store, hk, d})},
                    {ragged.v, array(vs, {tk_store, hk, dv})},
                    {ragged.cu_q, cuq},
                    {ragged.cu_kv, cukv},
                    {q_off, offsets(q_rows, h * d, tq_store)},
                    {k_off, offsets(kv_rows, hk * d, tk_store)},
                    {v_off, offsets(kv_rows, hk * dv, tk_store)},
                    {ragged.o, o_ragged},
                    {ragged.stats, st_ragged}});
    // o and stats follow q's placement; rows in q's gaps belong to no sequence (NaN).
    std::vector<double> want_o(tq_store * h * dv, kNaN), want_st(tq_store * h, kNaN);
    for (int b = 0; b < 2; ++b) {
      copy_rows(values(o_packed), want_o, h * dv, cu_q[b], q_rows[b], cu_q[b + 1] - cu_q[b]);
      copy_rows(values(st_packed), want_st, h, cu_q[b], q_rows[b], cu_q[b + 1] - cu_q[b]);
    }
    expect_all_near(values(o_ragged), want_o, 0);
    expect_all_near(values(st_ragged), want_st, 0);
    const auto want = test::oracle::sdpa(
        test::make_dense({tq_store, h, d}, qs), test::make_dense({tk_store, hk, d}, ks),
        test::make_dense({tk_store, hk, dv}, vs), Sequences::from_cu(cu_q, cu_kv, q_rows, kv_rows),
        1 / std::sqrt(4.0), causal);
    expect_all_near(values(o_ragged), want.o.data, 1e-5);
  }
}

TEST(ReferenceEngineSdpa, RaggedOffsetErrorsAreInvalidArgumentsFromExecute) {
  // Offsets that are no multiple of a row, and v placed elsewhere than k: refused by execute,
  // the output untouched.
  const int64_t h = 1, d = 2;
  SdpaGraph gr = sdpa_graph({3, h, d}, {4, h, d}, {4, h, d}, DType::f32, 2, false, false);
  Tensor k_off = input(gr.g, "k_off", {3}, DType::i32);
  Tensor v_off = input(gr.g, "v_off", {3}, DType::i32);
  gr.k.set_ragged_offset(k_off);
  gr.v.set_ragged_offset(v_off);
  plan::ExecutionPlans plans = build(gr.g);
  Array o = sentinel(gr.o);
  const Bindings base = {{gr.q, random({3, h, d})},
                         {gr.k, random({4, h, d})},
                         {gr.v, random({4, h, d})},
                         {gr.cu_q, array({0, 1, 3}, {3}, DType::i32)},
                         {gr.cu_kv, array({0, 1, 3}, {3}, DType::i32)},
                         {gr.o, o}};
  Bindings not_a_row = base;
  not_a_row.emplace_back(k_off, array({0, 3, 8}, {3}, DType::i32));
  not_a_row.emplace_back(v_off, array({0, 3, 8}, {3}, DType::i32));
  expect_throw_with<InvalidArgument>([&] { execute(plans, not_a_row); },
                                     {"ragged offset", "'k'", "multiple of a row"});
  EXPECT_TRUE(all_equal(o, 777));
  Bindings elsewhere = base;
  elsewhere.emplace_back(k_off, array({0, 4, 8}, {3}, DType::i32));
  elsewhere.emplace_back(v_off, array({0, 2, 8}, {3}, DType::i32));
  expect_throw_with<InvalidArgument>([&] { execute(plans, elsewhere); },
                                     {"v's ragged offset", "where k's"});
  EXPECT_TRUE(all_equal(o, 777));
  // The same pack with agreeing offsets runs.
  Bindings agree = base;
  agree.emplace_back(k_off, array({0, 4, 8}, {3}, DType::i32));
  agree.emplace_back(v_off, array({0, 4, 8}, {3}, DType::i32));
  execute(plans, agree);
  EXPECT_TRUE(all_finite(o));
}

TEST(ReferenceEngineSdpa, OutputRaggedOffsetsMustAgreeWithTheirAnchor) {
  // o follows q's rows; an o whose own ragged offset places it elsewhere is refused, not
  // written at q's rows. Likewise dk (k's rows) in the backward.
  const int64_t h = 1, d = 2;
  SdpaGraph gr = sdpa_graph({4, h, d}, {4, h, d}, {4, h, d}, DType::f64, 2, false, false);
  Tensor q_off = input(gr.g, "q_off", {3}, DType::i32),
         o_off = input(gr.g, "o_off", {3}, DType::i32);
  gr.q.set_ragged_offset(q_off);
  gr.o.set_ragged_offset(o_off);
  plan::ExecutionPlans plans = build(gr.g);
  Array o = sentinel(gr.o);
  Bindings bind = {{gr.q, random({4, h, d}, -1, 1, DType::f64)},
                   {gr.k, random({4, h, d}, -1, 1, DType::f64)},
                   {gr.v, random({4, h, d}, -1, 1, DType::f64)},
                   {gr.cu_q, array({0, 1, 3}, {3}, DType::i32)},
                   {gr.cu_kv, array({0, 2, 4}, {3}, DType::i32)},
                   {q_off, array({2, 4, 8}, {3}, DType::i32)},  // rows 1 and 2 of 4
                   {gr.o, o}};
  Bindings apart = bind;
  apart.emplace_back(o_off, array({0, 2, 8}, {3}, DType::i32));  // rows 0 and 1
  expect_throw_with<InvalidArgument>([&] { execute(plans, apart); },
                                     {"o's ragged offset", "where q's"});
  EXPECT_TRUE(all_equal(o, 777));
  Bindings agree = bind;
  agree.emplace_back(o_off, array({2, 4, 8}, {3}, DType::i32));
  execute(plans, agree);
  const auto got = values(o);
  EXPECT_TRUE(std::isnan(got[0]) && std::isnan(got[1]));  // row 0: in no sequence
  for (std::size_t i = 2; i < 8; ++i) EXPECT_TRUE(std::isfinite(got[i])) << i;

  Graph bg("sdpa_bwd");
  Tensor q = input(bg, "q", {3, h, d}), k = input(bg, "k", {4, h, d}),
         v = input(bg, "v", {4, h, d}), ot = input(bg, "o", {3, h, d}),
         dot = input(bg, "d_o", {3, h, d}), st = input(bg, "stats", {3, h}),
         cq = input(bg, "cu_q", {3}, DType::i32), ck = input(bg, "cu_kv", {3}, DType::i32),
         dk_off = input(bg, "dk_off", {3}, DType::i32);
  auto grads = bg.op("sdpa_bwd", {{"q", q},
                                  {"k", k},
                                  {"v", v},
                                  {"o", ot},
                                  {"d_o", dot},
                                  {"stats", st},
                                  {"cu_seqlens_q", cq},
                                  {"cu_seqlens_kv", ck}});
  Tensor dk = grads.at("dk");
  dk.set_output(true).set_ragged_offset(dk_off);
  plan::ExecutionPlans bplans = build(bg);
  Array dko = sentinel(dk);
  expect_throw_with<InvalidArgument>(
      [&] {
        execute(bplans, {{q, random({3, h, d})},
                         {k, random({4, h, d})},
                         {v, random({4, h, d})},
                         {ot, random({3, h, d})},
                         {dot, random({3, h, d})},
                         {st, random({3, h})},
                         {cq, array({0, 1, 3}, {3}, DType::i32)},
                         {ck, array({0, 2, 4}, {3}, DType::i32)},
                         {dk_off, array({0, 6, 8}, {3}, DType::i32)},  // k's rows are 0 and 2
                         {dk, dko}});
      },
      {"dk's ragged offset", "where k's"});
  EXPECT_TRUE(all_equal(dko, 777));
}

TEST(ReferenceEngineSdpa, CompositeGraphWithRaggedSdpaInputsRuns) {
  // q = x @ w feeds an sdpa whose k and v are stored with a gap: the ragged tensors are read by
  // the sdpa node only, so the reference serves the graph.
  const int64_t h = 1, d = 2;
  Graph g("composite_ragged");
  Tensor x = input(g, "x", {3, h, d}, DType::f64), w = input(g, "w", {d, d}, DType::f64);
  Tensor q = g.matmul(x, w);
  Tensor k = input(g, "k", {5, h, d}, DType::f64), v = input(g, "v", {5, h, d}, DType::f64);
  Tensor cq = input(g, "cu_q", {3}, DType::i32), ck = input(g, "cu_kv", {3}, DType::i32);
  Tensor kv_off = input(g, "kv_off", {3}, DType::i32);
  k.set_ragged_offset(kv_off);
  v.set_ragged_offset(kv_off);
  Tensor o =
      g.op("sdpa", {{"q", q}, {"k", k}, {"v", v}, {"cu_seqlens_q", cq}, {"cu_seqlens_kv", ck}})
          .at("o");
  o.set_output(true);
  plan::ExecutionPlans plans = engines::create_execution_plans(g, kCpu);
  EXPECT_EQ(plans.family(), "composite");
  plans.build_plans();
  Array xv = random({3, h, d}, -1, 1, DType::f64), wv = random({d, d}, -1, 1, DType::f64);
  Array kvv = random({5, h, d}, -1, 1, DType::f64), vvv = random({5, h, d}, -1, 1, DType::f64);
  Array oo = poisoned(o);
  execute(plans, {{x, xv},
                  {w, wv},
                  {k, kvv},
                  {v, vvv},
                  {cq, array({0, 1, 3}, {3}, DType::i32)},
                  {ck, array({0, 2, 4}, {3}, DType::i32)},
                  {kv_off, array({0, 6, 10}, {3}, DType::i32)},  // rows 0-1 and 3-4; row 2 a gap
                  {o, oo}});
  const auto want = test::oracle::sdpa(
      test::oracle::matmul(to_dense(xv), to_dense(wv)), to_dense(kvv), to_dense(vvv),
      Sequences::from_cu({0, 1, 3}, {0, 2, 4}, {}, {0, 3}), 1 / std::sqrt(2.0), false);
  expect_all_near(values(oo), want.o.data, 1e-13);
}

TEST(ReferenceEngineSdpa, RaggedTensorsReadByOtherOpsAreDeclined) {
  Graph g("ragged_pointwise");
  Tensor x = input(g, "x", {4, 1, 2}), off = input(g, "off", {3}, DType::i32);
  x.set_ragged_offset(off);
  g.pointwise("exp", x).set_output(true);
  plan::ExecutionPlans plans = engines::create_execution_plans(g, kCpu);
  expect_throw_with<NotSupported>([&] { plans.build_plans(); }, {"reference", "ragged offset"});
}

// Sum over i of w[i] * x[i].
double weighted_sum(const std::vector<double>& w, const Array& x) {
  const auto v = values(x);
  double s = 0;
  for (std::size_t i = 0; i < v.size(); ++i) s += w[i] * v[i];
  return s;
}

TEST(ReferenceEngineSdpa, BackwardMatchesFiniteDifferencesOfTheForwardGraph) {
  const AttnDims s{2, 1, 3, 2};
  const std::vector<int64_t> cu_q = {0, 2, 5}, cu_kv = {0, 3, 6};
  const int64_t tq = 5, tk = 6;
  for (bool causal : {false, true}) {
    SCOPED_TRACE(causal ? "causal" : "full");
    SdpaGraph fwd =
        sdpa_graph({tq, s.h, s.d}, {tk, s.hk, s.d}, {tk, s.hk, s.dv}, DType::f64, 2, causal, true);
    plan::ExecutionPlans fplans = build(fwd.g);
    Array qv = random({tq, s.h, s.d}, -1, 1, DType::f64),
          kv = random({tk, s.hk, s.d}, -1, 1, DType::f64),
          vv = random({tk, s.hk, s.dv}, -1, 1, DType::f64);
    const Array cuq = array(as_doubles(cu_q), {3}, DType::i32),
                cukv = array(as_doubles(cu_kv), {3}, DType::i32);
    Array o = poisoned(fwd.o), st = poisoned(fwd.stats);
    const plan::VariantPack fpack = pack_of(fplans, {{fwd.q, qv},
                                                     {fwd.k, kv},
                                                     {fwd.v, vv},
                                                     {fwd.cu_q, cuq},
                                                     {fwd.cu_kv, cukv},
                                                     {fwd.o, o},
                                                     {fwd.stats, st}});
    fplans.execute(fpack, {});
    const Array o_saved = o.to(kCpu), st_saved = st.to(kCpu);
    const std::vector<double> d_o = random_values(tq * s.h * s.dv);

    Graph bg("sdpa_bwd");
    Tensor q = input(bg, "q", {tq, s.h, s.d}, DType::f64),
           k = input(bg, "k", {tk, s.hk, s.d}, DType::f64),
           v = input(bg, "v", {tk, s.hk, s.dv}, DType::f64),
           ot = input(bg, "o", {tq, s.h, s.dv}, DType::f64),
           dot = input(bg, "d_o", {tq, s.h, s.dv}, DType::f64),
           stt = input(bg, "stats", {tq, s.h}, DType::f32), cq = input(bg, "cu_q", {3}, DType::i32),
           ck = input(bg, "cu_kv", {3}, DType::i32);
    auto grads = bg.op("sdpa_bwd",
                       {{"q", q},
                        {"k", k},
                        {"v", v},
                        {"o", ot},
                        {"d_o", dot},
                        {"stats", stt},
                        {"cu_seqlens_q", cq},
                        {"cu_seqlens_kv", ck}},
                       {{"causal", causal}});
    Tensor dq = grads.at("dq"), dk = grads.at("dk"), dv = grads.at("dv");
    for (Tensor t : {dq, dk, dv}) t.set_output(true);
    Array dqo = poisoned(dq), dko = poisoned(dk), dvo = poisoned(dv);
    execute(build(bg), {{q, qv},
                        {k, kv},
                        {v, vv},
                        {ot, o_saved},
                        {dot, array(d_o, {tq, s.h, s.dv}, DType::f64)},
                        {stt, st_saved},
                        {cq, cuq},
                        {ck, cukv},
                        {dq, dqo},
                        {dk, dko},
                        {dv, dvo}});

    const auto loss = [&] {
      fplans.execute(fpack, {});
      return weighted_sum(d_o, o);
    };
    // The backward reads the forward's f32 stats: agreement to about f32 precision.
    EXPECT_LE(rel_error(values(dqo), central_difference(qv, loss, 1e-5)), 1e-5);
    EXPECT_LE(rel_error(values(dko), central_difference(kv, loss, 1e-5)), 1e-5);
    EXPECT_LE(rel_error(values(dvo), central_difference(vv, loss, 1e-5)), 1e-5);
  }
}

TEST(ReferenceEngineSdpa, DenseBackwardEqualsThdBackward) {
  const int64_t b = 2, sq = 2, sk = 3, h = 2, hk = 1, d = 3;
  Array qv = random({b, sq, h, d}, -1, 1, DType::f64),
        kv = random({b, sk, hk, d}, -1, 1, DType::f64),
        vv = random({b, sk, hk, d}, -1, 1, DType::f64),
        ov = random({b, sq, h, d}, -1, 1, DType::f64),
        dov = random({b, sq, h, d}, -1, 1, DType::f64), sv = random({b, sq, h}, 0, 1);
  std::vector<Array> dq_results;
  for (bool dense : {true, false}) {
    SCOPED_TRACE(dense ? "dense" : "thd");
    const auto shape = [&](const Shape& full) {
      return dense ? full : Shape{full[0] * full[1], full[2], full[3]};
    };
    Graph g("sdpa_bwd");
    Tensor q = input(g, "q", shape({b, sq, h, d}), DType::f64),
           k = input(g, "k", shape({b, sk, hk, d}), DType::f64),
           v = input(g, "v", shape({b, sk, hk, d}), DType::f64),
           o = input(g, "o", shape({b, sq, h, d}), DType::f64),
           d_o = input(g, "d_o", shape({b, sq, h, d}), DType::f64),
           st = input(g, "stats", dense ? Shape{b, sq, h} : Shape{b * sq, h}, DType::f32);
    Ports p = {{"q", q}, {"k", k}, {"v", v}, {"o", o}, {"d_o", d_o}, {"stats", st}};
    Bindings bind = {{q, qv.reshape(shape({b, sq, h, d}))},
                     {k, kv.reshape(shape({b, sk, hk, d}))},
                     {v, vv.reshape(shape({b, sk, hk, d}))},
                     {o, ov.reshape(shape({b, sq, h, d}))},
                     {d_o, dov.reshape(shape({b, sq, h, d}))},
                     {st, sv.reshape(dense ? Shape{b, sq, h} : Shape{b * sq, h})}};
    if (!dense) {
      Tensor cq = input(g, "cu_q", {3}, DType::i32), ck = input(g, "cu_kv", {3}, DType::i32);
      p.emplace_back("cu_seqlens_q", cq);
      p.emplace_back("cu_seqlens_kv", ck);
      bind.emplace_back(cq, array({0, 2, 4}, {3}, DType::i32));
      bind.emplace_back(ck, array({0, 3, 6}, {3}, DType::i32));
    }
    auto grads = g.op("sdpa_bwd", p, {{"causal", true}});
    for (const char* port : {"dq", "dk", "dv"}) {
      Tensor t = grads.at(port);
      t.set_output(true);
      Array a = poisoned(t);
      bind.emplace_back(t, a);
      if (std::string(port) == "dq") dq_results.push_back(a);
    }
    execute(build(g), bind);
  }
  ASSERT_EQ(dq_results.size(), 2u);
  EXPECT_TRUE(all_finite(dq_results[0]));
  EXPECT_EQ(values(dq_results[0]), values(dq_results[1]));
}

// ---- linear attention ----------------------------------------------------------------------

struct DeltaCase {
  explicit DeltaCase(std::string r) : rule(std::move(r)) {}
  std::string rule;  // gdn, kda, gdn2
  std::vector<int64_t> cu = {0, 3, 5};
  int64_t h = 1, hv = 2, k = 3, v = 2;
  bool initial_state = true, l2 = false, safe_gate = false, beta_sigmoid = false;
  std::optional<double> scale;
  DType dtype = DType::f32;
  int64_t t() const { return cu.back(); }
  int64_t b() const { return static_cast<int64_t>(cu.size()) - 1; }
  double scale_value() const { return scale ? *scale : 1 / std::sqrt(static_cast<double>(k)); }
};

// Fresh inputs by port name, in each port's domain.
std::map<std::string, Array> delta_inputs(const DeltaCase& c) {
  const int64_t t = c.t();
  const bool gdn = c.rule == "gdn";
  const DType dt = c.dtype;
  std::map<std::string, Array> in;
  in["q"] = random({t, c.h, c.k}, -1, 1, dt);
  in["k"] = random({t, c.h, c.k}, -1, 1, dt);
  in["v"] = random({t, c.hv, c.v}, -1, 1, dt);
  const Shape gate = gdn ? Shape{t, c.hv} : Shape{t, c.hv, c.k};
  in["g"] = c.safe_gate ? random(gate, -1, 1, dt) : random(gate, -0.7, -0.05, dt);
  if (c.rule == "gdn2") {
    in["b"] = random(gate, 0.1, 0.9, dt);
    in["w"] = random({t, c.hv, c.v}, 0.2, 1, dt);
  } else {
    in["beta"] = c.beta_sigmoid ? random({t, c.hv}, -2, 2, dt) : random({t, c.hv}, 0.1, 0.9, dt);
  }
  if (c.initial_state) in["initial_state"] = random({c.b(), c.hv, c.k, c.v}, -0.5, 0.5, dt);
  if (c.safe_gate) {
    in["a_log"] = random({c.hv}, -1, 0, dt);
    in["dt_bias"] = random({c.hv}, -0.5, 0.5, dt);
  }
  in["cu_seqlens"] = array(as_doubles(c.cu), {c.b() + 1}, DType::i32);
  return in;
}

struct DeltaGraph {
  Graph g{"delta"};
  std::map<std::string, Tensor> in, out;
};

// The forward (or backward, with d_o and optionally d_final_state inputs) graph of `c`, every
// output marked an output.
DeltaGraph delta_graph(const DeltaCase& c, const std::map<std::string, Array>& in, bool backward,
                       bool d_final_state = false) {
  DeltaGraph d;
  Ports ports;
  for (const auto& [name, a] : in) {
    d.in[name] = input(d.g, name, a.shape(), a.dtype());
    ports.emplace_back(name, d.in[name]);
  }
  if (backward) {
    d.in["d_o"] = input(d.g, "d_o", {c.t(), c.hv, c.v}, c.dtype);
    ports.emplace_back("d_o", d.in["d_o"]);
    if (d_final_state) {
      d.in["d_final_state"] = input(d.g, "d_final_state", {c.b(), c.hv, c.k, c.v}, c.dtype);
      ports.emplace_back("d_final_state", d.in["d_final_state"]);
    }
  }
  Attrs attrs = {{"use_qk_l2norm", c.l2}};
  if (c.scale) attrs.emplace_back("scale", *c.scale);
  if (c.rule == "gdn") {
    attrs.emplace_back("safe_gate", c.safe_gate);
    attrs.emplace_back("use_beta_sigmoid", c.beta_sigmoid);
  }
  if (!backward) attrs.emplace_back("output_final_state", true);
  for (auto& [port, t] : d.g.op(backward ? c.rule + "_bwd" : c.rule, ports, attrs)) {
    t.set_output(true);
    d.out[port] = t;
  }
  return d;
}

// The oracle's recurrence on the case's inputs.
test::oracle::DeltaOut delta_formula(const DeltaCase& c, const std::map<std::string, Array>& in) {
  const auto get = [&](const char* port) {
    const auto it = in.find(port);
    return it == in.end() ? test::Dense() : to_dense(it->second);
  };
  const test::oracle::DeltaOperands ops{
      get("q"),     get("k"),       get("v"), get("g"),
      get("beta"),  get("b"),       get("w"), get("initial_state"),
      get("a_log"), get("dt_bias"), c.cu};
  return test::oracle::delta_rule(c.rule, ops,
                                  {c.scale_value(), c.l2, c.safe_gate, c.beta_sigmoid});
}

Bindings delta_bindings(const DeltaGraph& d, const std::map<std::string, Array>& in) {
  Bindings bind;
  for (const auto& [name, a] : in) bind.emplace_back(d.in.at(name), a);
  return bind;
}

TEST(ReferenceEngineLinearAttention, GdnHandComputedSingleToken) {
  // K = V = 1, scale 1: S = 0.5 * 4 = 2; e = 2 * 3 = 6; S += 0.5 * 3 * (5 - 6) -> 0.5;
  // o = 0.5 * 2 = 1.
  DeltaCase c("gdn");
  c.cu = {0, 1};
  c.hv = 1;
  c.k = 1;
  c.v = 1;
  c.scale = 1.0;
  c.dtype = DType::f64;
  std::map<std::string, Array> in = {
      {"q", array({2}, {1, 1, 1}, DType::f64)},
      {"k", array({3}, {1, 1, 1}, DType::f64)},
      {"v", array({5}, {1, 1, 1}, DType::f64)},
      {"g", array({std::log(0.5)}, {1, 1}, DType::f64)},
      {"beta", array({0.5}, {1, 1}, DType::f64)},
      {"initial_state", array({4}, {1, 1, 1, 1}, DType::f64)},
      {"cu_seqlens", array({0, 1}, {2}, DType::i32)},
  };
  DeltaGraph d = delta_graph(c, in, false);
  Array o = poisoned(d.out.at("o")), fs = poisoned(d.out.at("final_state"));
  Bindings bind = delta_bindings(d, in);
  bind.emplace_back(d.out.at("o"), o);
  bind.emplace_back(d.out.at("final_state"), fs);
  execute(build(d.g), bind);
  expect_all_near(values(o), {1.0}, 1e-15);
  expect_all_near(values(fs), {0.5}, 1e-15);
}

TEST(ReferenceEngineLinearAttention, ForwardMatchesTheRecurrence) {
  std::vector<DeltaCase> cases = {DeltaCase("gdn"), DeltaCase("kda"), DeltaCase("gdn2")};
  DeltaCase gated("gdn");
  gated.l2 = gated.safe_gate = gated.beta_sigmoid = true;
  gated.scale = 0.8;
  cases.push_back(gated);
  DeltaCase plain("kda");
  plain.initial_state = false;
  plain.l2 = true;
  plain.h = 2;
  plain.hv = 4;
  cases.push_back(plain);
  DeltaCase wide("gdn2");
  wide.cu = {0, 1, 1, 4};  // an empty sequence
  cases.push_back(wide);
  for (const DeltaCase& c : cases) {
    SCOPED_TRACE(c.rule + (c.safe_gate ? " safe gate" : "") + (c.l2 ? " l2" : ""));
    const auto in = delta_inputs(c);
    DeltaGraph d = delta_graph(c, in, false);
    Array o = poisoned(d.out.at("o")), fs = poisoned(d.out.at("final_state"));
    Bindings bind = delta_bindings(d, in);
    bind.emplace_back(d.out.at("o"), o);
    bind.emplace_back(d.out.at("final_state"), fs);
    execute(build(d.g), bind);
    const auto want = delta_formula(c, in);
    expect_all_near(values(o), want.o.data, 1e-5);
    expect_all_near(values(fs), want.final_state.data, 1e-5);
  }
}

TEST(ReferenceEngineLinearAttention, BackwardGraphsProduceEveryConditionalOutput) {
  struct Case {
    DeltaCase c;
    bool d_final_state;
    std::vector<std::string> outputs;
  };
  DeltaCase gdn("gdn");
  gdn.safe_gate = gdn.l2 = gdn.beta_sigmoid = true;
  DeltaCase kda("kda");
  kda.initial_state = false;
  DeltaCase gdn2("gdn2");
  const std::vector<Case> cases = {
      {gdn, true, {"d_a_log", "d_dt_bias", "d_initial_state", "dbeta", "dg", "dk", "dq", "dv"}},
      {kda, false, {"dbeta", "dg", "dk", "dq", "dv"}},
      {gdn2, true, {"d_initial_state", "db", "dg", "dk", "dq", "dv", "dw"}},
  };
  for (const Case& cs : cases) {
    SCOPED_TRACE(cs.c.rule + "_bwd");
    const auto in = delta_inputs(cs.c);
    DeltaGraph d = delta_graph(cs.c, in, true, cs.d_final_state);
    std::vector<std::string> names;
    for (const auto& [port, t] : d.out) names.push_back(port);
    EXPECT_EQ(names, cs.outputs);
    Bindings bind = delta_bindings(d, in);
    bind.emplace_back(d.in.at("d_o"), random({cs.c.t(), cs.c.hv, cs.c.v}));
    if (cs.d_final_state)
      bind.emplace_back(d.in.at("d_final_state"), random({cs.c.b(), cs.c.hv, cs.c.k, cs.c.v}));
    std::map<std::string, Array> outs;
    for (const auto& [port, t] : d.out) {
      outs[port] = poisoned(t);
      bind.emplace_back(t, outs[port]);
    }
    execute(build(d.g), bind);
    for (const auto& [port, a] : outs) EXPECT_TRUE(all_finite(a)) << port << " not fully written";
  }
}

// Checks gradients of L = sum(d_o * o) + sum(d_fs * final_state) from the backward graph
// against central differences through the forward graph, in f64.
void check_delta_gradients(const DeltaCase& c, const std::map<std::string, std::string>& checks) {
  const auto in = delta_inputs(c);
  DeltaGraph fwd = delta_graph(c, in, false);
  plan::ExecutionPlans fplans = build(fwd.g);
  Array o = poisoned(fwd.out.at("o")), fs = poisoned(fwd.out.at("final_state"));
  Bindings fb = delta_bindings(fwd, in);
  fb.emplace_back(fwd.out.at("o"), o);
  fb.emplace_back(fwd.out.at("final_state"), fs);
  const plan::VariantPack fpack = pack_of(fplans, fb);
  const std::vector<double> d_o = random_values(c.t() * c.hv * c.v),
                            d_fs = random_values(c.b() * c.hv * c.k * c.v);
  const auto loss = [&] {
    fplans.execute(fpack, {});
    return weighted_sum(d_o, o) + weighted_sum(d_fs, fs);
  };

  DeltaGraph bwd = delta_graph(c, in, true, true);
  Bindings bb = delta_bindings(bwd, in);
  bb.emplace_back(bwd.in.at("d_o"), array(d_o, {c.t(), c.hv, c.v}, DType::f64));
  bb.emplace_back(bwd.in.at("d_final_state"), array(d_fs, {c.b(), c.hv, c.k, c.v}, DType::f64));
  std::map<std::string, Array> grads;
  for (const auto& [port, t] : bwd.out) {
    grads[port] = poisoned(t);
    bb.emplace_back(t, grads[port]);
  }
  execute(build(bwd.g), bb);
  for (const auto& [input_port, grad_port] : checks) {
    SCOPED_TRACE(grad_port);
    // f32 gradients (dg, d_initial_state, d_a_log, ...) agree to f32 precision.
    const double tol = grads.at(grad_port).dtype() == DType::f64 ? 1e-7 : 1e-5;
    EXPECT_LE(
        rel_error(values(grads.at(grad_port)), central_difference(in.at(input_port), loss, 1e-5)),
        tol);
  }
}

TEST(ReferenceEngineLinearAttention, BackwardMatchesFiniteDifferences) {
  DeltaCase gdn("gdn");
  gdn.safe_gate = gdn.l2 = gdn.beta_sigmoid = true;
  gdn.dtype = DType::f64;
  check_delta_gradients(gdn, {{"q", "dq"},
                              {"g", "dg"},
                              {"beta", "dbeta"},
                              {"a_log", "d_a_log"},
                              {"dt_bias", "d_dt_bias"},
                              {"initial_state", "d_initial_state"}});
  DeltaCase kda("kda");
  kda.dtype = DType::f64;
  kda.h = 1;
  kda.hv = 2;
  check_delta_gradients(kda, {{"k", "dk"}, {"v", "dv"}, {"g", "dg"}});
  DeltaCase gdn2("gdn2");
  gdn2.dtype = DType::f64;
  gdn2.l2 = true;
  check_delta_gradients(gdn2, {{"q", "dq"},
                               {"k", "dk"},
                               {"v", "dv"},
                               {"g", "dg"},
                               {"b", "db"},
                               {"w", "dw"},
                               {"initial_state", "d_initial_state"}});
}

// ---- errors --------------------------------------------------------------------------------

struct AddGraph {
  Graph g{"add"};
  Tensor a, b, out;
  AddGraph() {
    a = input(g, "a", {2, 3});
    b = input(g, "b", {2, 3});
    out = g.pointwise("add", a, b);
    out.set_name("sum").set_output(true);
  }
};

TEST(ReferenceEngineErrors, ExecuteBeforeBuildPlans) {
  AddGraph ag;
  plan::ExecutionPlans plans = engines::create_execution_plans(ag.g, kCpu);
  Array o = sentinel(ag.out);
  const Array av = random({2, 3}), bv = random({2, 3});  // the pack points into them
  const plan::VariantPack pack = pack_of(plans, {{ag.a, av}, {ag.b, bv}, {ag.out, o}});
  expect_throw_with<InvalidArgument>([&] { plans.execute(pack, {}); }, {"build_plans"});
  EXPECT_TRUE(all_equal(o, 777));
  plans.build_plans();
  plans.execute(pack, {});
  EXPECT_FALSE(all_equal(o, 777));
}

TEST(ReferenceEngineErrors, BadOperandsNameTheOperandAndLeaveOutputsAlone) {
  AddGraph ag;
  plan::ExecutionPlans plans = build(ag.g);
  Array o = sentinel(ag.out);
  const Array good = random({2, 3});
  const auto expect_refused = [&](const Bindings& bind, std::initializer_list<std::string> what) {
    expect_throw_with<InvalidArgument>([&] { execute(plans, bind); }, what);
    EXPECT_TRUE(all_equal(o, 777)) << "the output was written by a refused call";
  };
  // A missing operand.
  expect_refused({{ag.a, good}, {ag.out, o}}, {"'b'", "no buffer"});
  expect_refused({{ag.a, good}, {ag.b, good}}, {"'sum'", "no buffer"});
  // Wrong dtype, dims, device.
  expect_refused({{ag.a, good}, {ag.b, random({2, 3}, -1, 1, DType::f64)}, {ag.out, o}},
                 {"'b'", "dtype"});
  expect_refused({{ag.a, random({3, 2})}, {ag.b, good}, {ag.out, o}}, {"'a'", "dims"});
  expect_refused({{ag.a, good}, {ag.b, good}, {ag.out, random({6})}}, {"'sum'", "dims"});
  {
    // An operand on a CUDA device is refused before anything reads it (the pointer is a host
    // one here and is never dereferenced).
    std::vector<float> host(6, 1.0f);
    plan::VariantPack pack = pack_of(plans, {{ag.a, good}, {ag.out, o}});
    pack.set(ag.b, plan::Operand::raw(host.data(), {2, 3}, DType::f32, Device::cuda(0)));
    expect_throw_with<InvalidArgument>([&] { plans.execute(pack, {}); },
                                       {"'b'", "device", "cuda:0"});
    EXPECT_TRUE(all_equal(o, 777));
  }
  if (cuda_available()) {
    expect_refused({{ag.a, good}, {ag.b, good.to(Device::cuda(0))}, {ag.out, o}},
                   {"'b'", "device"});
  }
  // Tensors of another graph, and a pack made for another plan.
  AddGraph other;
  plan::VariantPack pack(plans.layout());
  expect_throw_with<InvalidArgument>([&] { pack.set(other.a, plan::Operand(good)); },
                                     {"another graph"});
  plan::ExecutionPlans other_plans = build(other.g);
  const plan::VariantPack foreign =
      pack_of(other_plans, {{other.a, good}, {other.b, good}, {other.out, o}});
  expect_throw_with<InvalidArgument>([&] { plans.execute(foreign, {}); }, {"another plan"});
  EXPECT_TRUE(all_equal(o, 777));
  // After all that, a good call works.
  execute(plans, {{ag.a, good}, {ag.b, good}, {ag.out, o}});
  std::vector<double> twice = values(good);
  for (double& x : twice) x *= 2;
  expect_all_near(values(o), twice, 1e-7);
}

TEST(ReferenceEngineErrors, DecreasingCuSeqlensIsRefusedByExecute) {
  {
    SdpaGraph gr = sdpa_graph({4, 1, 2}, {4, 1, 2}, {4, 1, 2}, DType::f32, 2, false, true);
    plan::ExecutionPlans plans = build(gr.g);
    Array o = sentinel(gr.o), st = sentinel(gr.stats);
    expect_throw_with<InvalidArgument>(
        [&] {
          execute(plans, {{gr.q, random({4, 1, 2})},
                          {gr.k, random({4, 1, 2})},
                          {gr.v, random({4, 1, 2})},
                          {gr.cu_q, array({0, 3, 2}, {3}, DType::i32)},
                          {gr.cu_kv, array({0, 2, 4}, {3}, DType::i32)},
                          {gr.o, o},
                          {gr.stats, st}});
        },
        {"cu_q", "never decrease"});
    EXPECT_TRUE(all_equal(o, 777));
    EXPECT_TRUE(all_equal(st, 777));
    // A sequence past the end of the tensor.
    expect_throw_with<InvalidArgument>(
        [&] {
          execute(plans, {{gr.q, random({4, 1, 2})},
                          {gr.k, random({4, 1, 2})},
                          {gr.v, random({4, 1, 2})},
                          {gr.cu_q, array({0, 2, 5}, {3}, DType::i32)},
                          {gr.cu_kv, array({0, 2, 4}, {3}, DType::i32)},
                          {gr.o, o},
                          {gr.stats, st}});
        },
        {"cu_seqlens_q 'cu_q' entry 2 = 5", "outside [0, 4]", "rows of q"});
    EXPECT_TRUE(all_equal(o, 777));
  }
  {
    DeltaCase c("gdn");
    const auto in = delta_inputs(c);
    DeltaGraph d = delta_graph(c, in, false);
    plan::ExecutionPlans plans = build(d.g);
    Array o = sentinel(d.out.at("o")), fs = sentinel(d.out.at("final_state"));
    Bindings bind = delta_bindings(d, in);
    bind.emplace_back(d.out.at("o"), o);
    bind.emplace_back(d.out.at("final_state"), fs);
    for (auto& [t, a] : bind)
      if (t == d.in.at("cu_seqlens")) a = array({0, 4, 5}, {3}, DType::i32);
    execute(plans, bind);  // legal: it runs
    EXPECT_FALSE(all_equal(o, 777));
    Array o2 = sentinel(d.out.at("o")), fs2 = sentinel(d.out.at("final_state"));
    for (auto& [t, a] : bind) {
      if (t == d.in.at("cu_seqlens")) a = array({0, 4, 3}, {3}, DType::i32);
      if (t == d.out.at("o")) a = o2;
      if (t == d.out.at("final_state")) a = fs2;
    }
    expect_throw_with<InvalidArgument>([&] { execute(plans, bind); }, {"cu_seqlens", "decreases"});
    EXPECT_TRUE(all_equal(o2, 777));
    EXPECT_TRUE(all_equal(fs2, 777));
  }
}

// ---- Hostile input: refused data, exact integers, defined conversions --------------------------

// The planned CPU call of `g` on `bindings`: run() must refuse (return false, no throw) and
// execute must throw InvalidArgument naming every needle.
void expect_refused(const plan::ExecutionPlans& plans, const Bindings& bindings,
                    std::initializer_list<std::string> needles) {
  const plan::VariantPack pack = pack_of(plans, bindings);
  EXPECT_FALSE(plans.compiled()->run(pack.data(), {}));
  expect_throw_with<InvalidArgument>([&] { plans.execute(pack, {}); }, needles);
}

TEST(ReferenceEngineHostile, CrossEntropyRefusesTargetsOutsideTheClasses) {
  Graph g("ce");
  Tensor logits = input(g, "logits", {4, 3}), tg = input(g, "targets", {4}, DType::i64);
  Tensor loss =
      g.op("cross_entropy", {{"logits", logits}, {"targets", tg}}, {{"reduction", "none"}})
          .at("loss");
  loss.set_output(true);
  const plan::ExecutionPlans plans = build(g);
  const Array lv = random({4, 3});
  for (const auto& [bad, needle] : std::vector<std::pair<std::vector<int64_t>, std::string>>{
           {{0, 3, 1, 2}, "targets element 1 = 3"},
           {{0, 1, -1, 2}, "targets element 2 = -1"},
           {{0, 1, 2, INT64_MAX}, "targets element 3 = 9223372036854775807"}}) {
    SCOPED_TRACE(needle);
    Array lo = sentinel(loss);
    expect_refused(
        plans, {{logits, lv}, {tg, Array::from(bad, {4}, kCpu)}, {loss, lo}},
        {"cross_entropy", needle, "outside [0, 3)", "only ignore_index = -100 may lie outside"});
    EXPECT_TRUE(all_equal(lo, 777));  // nothing written: no NaN slips out
  }
  // ignore_index rows are fine, and the rest is computed.
  Array lo = sentinel(loss);
  execute(plans, {{logits, lv},
                  {tg, Array::from(std::vector<int64_t>{0, -100, 2, 1}, {4}, kCpu)},
                  {loss, lo}});
  EXPECT_TRUE(all_finite(lo));
  EXPECT_EQ(values(lo)[1], 0.0);
}

// A one-node pointwise graph over i64 (or `dtype`) inputs, exactly as the caller gives them.
struct IntCase {
  std::string op;
  std::vector<int64_t> a, b;  // b empty: unary
  std::vector<int64_t> want;
};

// `v` as an array of `dtype`, each value converted by wrapping (as an integer cast does).
Array int_array(const std::vector<int64_t>& v, DType dtype) {
  Array out;
  visit_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    std::vector<T> w;
    for (int64_t x : v) w.push_back(static_cast<T>(x));
    out = Array::from(w, {static_cast<int64_t>(v.size())}, kCpu);
  });
  return out;
}

// Runs the case's op on inputs of `dtype`; the result read back as int64.
std::vector<int64_t> run_int(const IntCase& c, DType dtype = DType::i64) {
  Graph g(c.op);
  const int64_t n = static_cast<int64_t>(c.a.size());
  Tensor a = input(g, "a", {n}, dtype);
  Bindings bind = {{a, int_array(c.a, dtype)}};
  Tensor y;
  if (c.b.empty()) {
    y = g.pointwise(c.op, a);
  } else {
    Tensor b = input(g, "b", {n}, dtype);
    y = g.pointwise(c.op, a, b);
    bind.emplace_back(b, int_array(c.b, dtype));
  }
  y.set_output(true);
  const Array out = Array::empty(y.dims(), y.dtype(), kCpu);
  bind.emplace_back(y, out);
  execute(build(g), bind);
  return out.to_vector<int64_t>();
}

TEST(ReferenceEngineHostile, IntegerPointwiseIsExactAndWraps) {
  const int64_t kMax = INT64_MAX, kMin = INT64_MIN;
  const std::vector<IntCase> cases = {
      // Through float64, INT64_MAX + 0 came back as INT64_MIN (2^63 cast to int64).
      {"add",
       {kMax, kMax, kMin, (int64_t{1} << 53)},
       {0, 1, -1, 1},
       {kMax, kMin, kMax, (int64_t{1} << 53) + 1}},
      {"sub", {kMin, kMax, 0}, {1, -1, kMin}, {kMax, kMin, kMin}},
      {"mul",
       {int64_t{1} << 62, 3037000500, -1},
       {4, 3037000500, kMin},
       {0, static_cast<int64_t>(uint64_t{3037000500} * uint64_t{3037000500}), kMin}},
      // div truncates toward zero; INT64_MIN / -1 wraps.
      {"div", {-7, 7, kMin, kMax}, {2, -2, -1, kMax - 1}, {-3, -3, kMin, 1}},
      // mod takes the sign of a (fmod); INT64_MIN mod -1 is 0.
      {"mod", {-7, 7, kMin, kMax}, {2, -2, -1, kMax - 1}, {-1, 1, 0, 1}},
      {"max", {kMax - 1, kMin}, {kMax, kMin + 1}, {kMax, kMin + 1}},
      {"min", {kMax - 1, kMin}, {kMax, kMin + 1}, {kMax - 1, kMin}},
      // Neighbours above 2^53 compared exactly (as doubles they are equal).
      {"cmp_eq", {kMax, kMax}, {kMax - 1, kMax}, {0, 1}},
      {"cmp_lt", {kMax - 1, kMax}, {kMax, kMax}, {1, 0}},
      {"cmp_ge", {kMax - 1, kMin}, {kMax, kMin}, {0, 1}},
      {"neg", {kMin, kMax, 0}, {}, {kMin, -kMax, 0}},
      {"abs", {kMin, kMin + 1, -5}, {}, {kMin, kMax, 5}},
      {"square",
       {3037000500, -(int64_t{1} << 32)},
       {},
       {static_cast<int64_t>(uint64_t{3037000500} * uint64_t{3037000500}), 0}},
      {"relu", {kMin, kMax}, {}, {0, kMax}},
      {"identity", {kMax - 1, kMin + 1}, {}, {kMax - 1, kMin + 1}},
  };
  for (const IntCase& c : cases) {
    SCOPED_TRACE(c.op);
    EXPECT_EQ(run_int(c), c.want);
  }
  // Narrower types wrap at their own width.
  EXPECT_EQ(run_int({"add", {INT32_MAX, INT32_MIN}, {1, -1}, {}}, DType::i32),
            (std::vector<int64_t>{INT32_MIN, INT32_MAX}));
  EXPECT_EQ(run_int({"sub", {0, 5}, {1, 2}, {}}, DType::u32),
            (std::vector<int64_t>{UINT32_MAX, 3}));
  EXPECT_EQ(run_int({"mul", {16, 255}, {16, 255}, {}}, DType::u8), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(run_int({"div", {INT32_MIN}, {-1}, {}}, DType::i32), (std::vector<int64_t>{INT32_MIN}));
}

TEST(ReferenceEngineHostile, IntegerDivisionByZeroIsRefused) {
  for (const char* op : {"div", "mod"}) {
    SCOPED_TRACE(op);
    Graph g(op);
    Tensor a = input(g, "a", {3}, DType::i64), b = input(g, "b", {3}, DType::i64);
    Tensor y = g.pointwise(op, a, b);
    y.set_output(true);
    const plan::ExecutionPlans plans = build(g);
    Array out = Array::from(std::vector<int64_t>{7, 7, 7}, {3}, kCpu);
    expect_refused(plans,
                   {{a, Array::from(std::vector<int64_t>{4, 9, 1}, {3}, kCpu)},
                    {b, Array::from(std::vector<int64_t>{2, 0, 1}, {3}, kCpu)},
                    {y, out}},
                   {op, "b is 0 at element 1 (a = 9)", "by zero has no value"});
    EXPECT_EQ(out.to_vector<int64_t>(), (std::vector<int64_t>{7, 7, 7}));
  }
}

TEST(ReferenceEngineHostile, IntegerReductionsAreExact) {
  const int64_t kMax = INT64_MAX, kMin = INT64_MIN;
  struct Case {
    const char* mode;
    std::vector<int64_t> x;
    int64_t want;
  };
  for (const Case& c : std::vector<Case>{
           {"sum", {kMax, 1}, kMin},                                // wraps
           {"sum", {int64_t{1} << 53, 1}, (int64_t{1} << 53) + 1},  // lost in float64
           {"prod", {int64_t{1} << 32, int64_t{1} << 32}, 0},
           {"max", {kMax - 1, kMax, kMin}, kMax},
           {"min", {kMin + 1, kMin, kMax}, kMin},
           {"amax", {kMin, 5}, kMin},  // |INT64_MIN| wraps, like abs
           {"amax", {-7, 5}, 7},
           {"mean", {kMax, kMax, kMax}, kMax},    // the sum overflows; the mean does not
           {"mean", {-7, 0}, -3},                 // truncated toward zero
           {"mean", {kMin, kMin + 1}, kMin + 1},  // -2^63 + 0.5 toward zero
       }) {
    SCOPED_TRACE(std::string(c.mode) + " of " + std::to_string(c.x.size()));
    Graph g("red");
    const int64_t n = static_cast<int64_t>(c.x.size());
    Tensor x = input(g, "x", {n}, DType::i64);
    Tensor y = g.op("reduction", {{"x", x}}, {{"mode", c.mode}}).at("y");
    y.set_output(true);
    Array out = Array::empty({}, DType::i64, kCpu);
    execute(build(g), {{x, Array::from(c.x, {n}, kCpu)}, {y, out}});
    EXPECT_EQ(out.to_vector<int64_t>(), std::vector<int64_t>{c.want});
  }
  // Over no elements max, min and mean have no integer value: -inf, +inf and NaN saturate into
  // the output dtype (its lowest, its highest, 0); sum and prod are 0 and 1.
  for (const auto& [mode, want] : std::vector<std::pair<const char*, int64_t>>{
           {"max", INT32_MIN}, {"min", INT32_MAX}, {"mean", 0}, {"sum", 0}, {"prod", 1}}) {
    SCOPED_TRACE(mode);
    Graph g("empty");
    Tensor x = input(g, "x", {2, 0}, DType::i32);
    Tensor y = g.op("reduction", {{"x", x}}, {{"mode", mode}, {"axes", {1}}}).at("y");
    y.set_output(true);
    Array out = Array::empty({2}, DType::i32, kCpu);
    execute(build(g), {{x, Array::empty({2, 0}, DType::i32, kCpu)}, {y, out}});
    EXPECT_EQ(out.to_vector<int64_t>(), (std::vector<int64_t>{want, want}));
  }
}

TEST(ReferenceEngineHostile, CastsSaturateFloatsAndWrapIntegers) {
  const double inf = kInf;
  const std::vector<double> reals = {1e30, -1e30, inf, -inf, kNaN, 2.9, -2.9};
  const std::map<DType, std::vector<int64_t>> want = {
      {DType::i64, {INT64_MAX, INT64_MIN, INT64_MAX, INT64_MIN, 0, 2, -2}},
      {DType::i32, {INT32_MAX, INT32_MIN, INT32_MAX, INT32_MIN, 0, 2, -2}},
      {DType::u32, {UINT32_MAX, 0, UINT32_MAX, 0, 0, 2, 0}},
      {DType::u8, {255, 0, 255, 0, 0, 2, 0}},
      {DType::boolean, {1, 1, 1, 1, 1, 1, 1}},  // nonzero (NaN included) is true
  };
  for (DType from : {DType::f64, DType::f32}) {
    for (const auto& [to, expected] : want) {
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)));
      Graph g("cast");
      Tensor a = input(g, "a", {7}, from);
      Tensor y = g.pointwise("cast", a, {{"dtype", to}});
      y.set_output(true);
      Array out = Array::empty({7}, to, kCpu);
      execute(build(g), {{a, array(reals, {7}, from)}, {y, out}});
      EXPECT_EQ(out.to_vector<int64_t>(), expected);
    }
  }
  // Integer to integer wraps (two's complement), exactly.
  Graph g("narrow");
  Tensor a = input(g, "a", {3}, DType::i64);
  Tensor y32 = g.pointwise("cast", a, {{"dtype", DType::i32}});
  Tensor y8 = g.pointwise("cast", a, {{"dtype", DType::u8}});
  Tensor y64 = g.pointwise("cast", y32, {{"dtype", DType::i64}});
  y8.set_output(true);
  y64.set_output(true);
  Array o8 = Array::empty({3}, DType::u8, kCpu), o64 = Array::empty({3}, DType::i64, kCpu);
  execute(build(g),
          {{a, Array::from(std::vector<int64_t>{(int64_t{1} << 32) + 5, -1, INT64_MAX}, {3}, kCpu)},
           {y8, o8},
           {y64, o64}});
  EXPECT_EQ(o8.to_vector<int64_t>(), (std::vector<int64_t>{5, 255, 255}));
  EXPECT_EQ(o64.to_vector<int64_t>(), (std::vector<int64_t>{5, -1, -1}));
}

TEST(ReferenceEngineHostile, CuSeqlensAndOffsetsOutOfRangeAreRefused) {
  // sdpa: i64 cu_seqlens holding INT64_MAX (read through float64 before: undefined behaviour).
  Graph g("sdpa");
  Tensor q = input(g, "q", {4, 1, 2}), k = input(g, "k", {4, 1, 2});
  Tensor cq = input(g, "cu_q", {3}, DType::i64), ck = input(g, "cu_kv", {3}, DType::i64);
  Tensor o =
      g.op("sdpa", {{"q", q}, {"k", k}, {"v", k}, {"cu_seqlens_q", cq}, {"cu_seqlens_kv", ck}})
          .at("o");
  o.set_output(true);
  const plan::ExecutionPlans plans = build(g);
  const Array qv = random({4, 1, 2}), kv = random({4, 1, 2});
  const auto cu = [](std::vector<int64_t> v) { return Array::from(v, {3}, kCpu); };
  for (const auto& [cqv, ckv, needles] :
       std::vector<std::tuple<Array, Array, std::vector<std::string>>>{
           {cu({0, 2, INT64_MAX}),
            cu({0, 2, 4}),
            {"cu_seqlens_q 'cu_q' entry 2 = 9223372036854775807", "outside [0, 4]", "rows of q"}},
           {cu({0, 2, 4}),
            cu({INT64_MIN, 2, 4}),
            {"cu_seqlens_kv 'cu_kv' entry 0 = -9223372036854775808", "outside [0, 4]",
             "rows of k"}},
           {cu({0, -1, 4}), cu({0, 2, 4}), {"cu_seqlens_q 'cu_q' entry 1 = -1"}}}) {
    Array out = sentinel(o);
    const plan::VariantPack pack =
        pack_of(plans, {{q, qv}, {k, kv}, {cq, cqv}, {ck, ckv}, {o, out}});
    EXPECT_FALSE(plans.compiled()->run(pack.data(), {}));
    try {
      plans.execute(pack, {});
      ADD_FAILURE() << "expected InvalidArgument";
    } catch (const InvalidArgument& e) {
      for (const std::string& n : needles)
        EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what() << " / " << n;
    }
    EXPECT_TRUE(all_equal(out, 777));
  }
  // A ragged offset past its tensor.
  {
    Graph r("ragged");
    Tensor rq = input(r, "q", {4, 1, 2}), rk = input(r, "k", {4, 1, 2});
    Tensor rcq = input(r, "cu_q", {3}, DType::i32), rck = input(r, "cu_kv", {3}, DType::i32);
    Tensor off = input(r, "q_off", {3}, DType::i64);
    rq.set_ragged_offset(off);
    Tensor ro =
        r.op("sdpa",
             {{"q", rq}, {"k", rk}, {"v", rk}, {"cu_seqlens_q", rcq}, {"cu_seqlens_kv", rck}})
            .at("o");
    ro.set_output(true);
    Array out = sentinel(ro);
    expect_refused(build(r),
                   {{rq, qv},
                    {rk, kv},
                    {rcq, array({0, 2, 4}, {3}, DType::i32)},
                    {rck, array({0, 2, 4}, {3}, DType::i32)},
                    {off, cu({0, INT64_MAX - 1, 8})},
                    {ro, out}},
                   {"ragged offset 'q_off' of 'q' entry 1 = 9223372036854775806", "outside [0, 8]",
                    "element offsets into 'q'"});
    EXPECT_TRUE(all_equal(out, 777));
  }
  // gdn: cu_seqlens past T.
  DeltaCase c("gdn");
  std::map<std::string, Array> in = delta_inputs(c);
  in["cu_seqlens"] = Array::from(std::vector<int64_t>{0, 3, 5}, {3}, kCpu);
  DeltaGraph d = delta_graph(c, in, false);
  const plan::ExecutionPlans dp = build(d.g);
  in["cu_seqlens"] = Array::from(std::vector<int64_t>{0, INT64_MAX, 5}, {3}, kCpu);
  Bindings bind = delta_bindings(d, in);
  Array dout = sentinel(d.out.at("o")), dstate = sentinel(d.out.at("final_state"));
  bind.emplace_back(d.out.at("o"), dout);
  bind.emplace_back(d.out.at("final_state"), dstate);
  expect_refused(
      dp, bind,
      {"cu_seqlens 'cu_seqlens' entry 1 = 9223372036854775807", "outside [0, 5]", "rows of q"});
  EXPECT_TRUE(all_equal(dout, 777));
}

TEST(ReferenceEngineHostile, OutputsMustBeWritableAndNotOverlapInputsMayBroadcast) {
  Graph g("add");
  Tensor a = input(g, "a", {2, 3}), b = input(g, "b", {2, 3});
  Tensor y = g.pointwise("add", a, b);
  y.set_output(true);
  const plan::ExecutionPlans plans = build(g);
  const Array av = random({2, 3});
  // An input may broadcast with stride 0: b's one row is read for both rows.
  std::vector<float> row = {10, 20, 30};
  Array out = Array::empty({2, 3}, DType::f32, kCpu);
  plan::VariantPack pack(plans.layout());
  pack.set(a, av).set(b, plan::Operand::raw(row.data(), {2, 3}, DType::f32, kCpu, {0, 1}));
  pack.set(y, out);
  plans.execute(pack, {});
  const auto x = values(av), got = values(out);
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(static_cast<float>(got[i]), x[i] + row[i % 3]);
  // An output with stride 0 would have both rows written to one place.
  std::vector<float> one_row(3, 777);
  pack.set(y, plan::Operand::raw(one_row.data(), {2, 3}, DType::f32, kCpu, {0, 1}));
  EXPECT_FALSE(plans.compiled()->run(pack.data(), {}));
  expect_throw_with<InvalidArgument>([&] { plans.execute(pack, {}); },
                                     {"operand '", "share memory", "with strides [0,1]"});
  EXPECT_EQ(one_row, std::vector<float>(3, 777));
  // A read-only output (e.g. a DLPack import flagged read-only) is not written.
  Array ro = sentinel(y);
  pack.set(y, ro.as_read_only());
  expect_throw_with<InvalidArgument>([&] { plans.execute(pack, {}); },
                                     {"read-only and the plan writes it"});
  EXPECT_TRUE(all_equal(ro, 777));
}

}  // namespace
}  // namespace eagle
