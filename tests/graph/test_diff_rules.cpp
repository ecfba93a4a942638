// The derivative of every standard kernel (src/graph/derivatives.cpp) against float64 central
// finite differences on the CPU, on fresh random inputs: the gradient recorded by
// diff::gradients for a random cotangent c must be J^T c. And the saves RecordOptions::record
// makes before in-place overwrites (src/graph/saving.cpp).
#include <gtest/gtest.h>

#include <cmath>

#include "eagle/eagle.hpp"
#include "random.hpp"
#include "test_util.hpp"

namespace eagle {
namespace {

const Device cpu = Device::cpu();

struct RuleCase {
  const char* name;
  const Kernel& (*kernel)();
  std::vector<Shape> shapes;  // of the inputs
  std::vector<DType> dtypes;
  std::vector<Scalar> scalars;
  Shape out_shape = {};  // given by buffer= (broadcast)
};

std::vector<Array> random_inputs(const RuleCase& c) {
  std::vector<Array> in;
  for (std::size_t i = 0; i < c.shapes.size(); ++i)
    in.push_back(test::random_array(c.shapes[i], c.dtypes[i], cpu, -2.0, 2.0));
  return in;
}

// The kernel's output, run eagerly.
std::vector<double> evaluate(const RuleCase& c, const std::vector<Array>& in) {
  Stream stream(cpu);
  if (!c.out_shape.empty()) {
    Array out = Array::empty(c.out_shape, DType::f64, cpu);
    launch_into(c.kernel(), in, c.scalars, {out}, stream, ThreadTeam::serial());
    return out.to_vector<double>();
  }
  return launch(c.kernel(), in, c.scalars, stream, ThreadTeam::serial())[0].to_vector<double>();
}

// J^T c by central differences, for input `which`.
std::vector<double> finite_difference(const RuleCase& c, std::vector<Array> in, int which,
                                      const std::vector<double>& cot) {
  const double h = 1e-6;
  std::vector<double> x = in[which].to_vector<double>(), grad(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    std::vector<double> plus = x, minus = x;
    plus[i] += h;
    minus[i] -= h;
    in[which] = Array::from(plus, c.shapes[which], cpu);
    const std::vector<double> fp = evaluate(c, in);
    in[which] = Array::from(minus, c.shapes[which], cpu);
    const std::vector<double> fm = evaluate(c, in);
    for (std::size_t j = 0; j < cot.size(); ++j) grad[i] += cot[j] * (fp[j] - fm[j]) / (2 * h);
  }
  return grad;
}

void check_rule(const RuleCase& c) {
  SCOPED_TRACE(c.name);
  const std::vector<Array> in = random_inputs(c);
  const Shape out_shape =
      c.out_shape.empty() ? (c.kernel().def().reduces ? Shape{1} : c.shapes[0]) : c.out_shape;
  const Array cot = test::random_array(out_shape, DType::f64, cpu, -1.0, 1.0);
  std::vector<int> wrt_index;
  Graph g = Graph::record(
      [&](Recorder& r) {
        std::vector<Arg> args;
        std::vector<Value> wrt;
        for (std::size_t i = 0; i < in.size(); ++i) {
          Value x = r.param("x" + std::to_string(i), in[i]);
          args.push_back(x);
          if (is_floating(in[i].dtype())) {
            wrt.push_back(x);
            wrt_index.push_back(static_cast<int>(i));
          }
        }
        for (const Scalar& s : c.scalars) args.push_back(s);
        CallOptions opts;
        if (!c.out_shape.empty()) opts.buffers.push_back(r.empty(c.out_shape, DType::f64, "out"));
        const Value out = r.call(c.kernel(), args, opts);
        r.result(diff::gradients(r, {out}, wrt, {r.param("cot", cot)}));
      },
      RecordOptions{.record = true});
  g.build(cpu);
  const std::vector<Array>& grads = g();
  ASSERT_EQ(grads.size(), wrt_index.size());
  for (std::size_t k = 0; k < wrt_index.size(); ++k) {
    SCOPED_TRACE("input " + std::to_string(wrt_index[k]));
    const std::vector<double> got = grads[k].to_vector<double>();
    const std::vector<double> want =
        finite_difference(c, in, wrt_index[k], cot.to_vector<double>());
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(got[i], want[i], 1e-6 * (1 + std::abs(want[i]))) << "element " << i;
  }
}

TEST(DiffRules, EveryStandardDerivativeMatchesFiniteDifferences) {
  const DType f = DType::f64;
  const Shape s = {3, 4};
  const std::vector<RuleCase> cases = {
      {"copy", &kernels::copy, {s}, {f}, {}},
      {"scale", &kernels::scale, {s}, {f}, {1.7}},
      {"axpy", &kernels::axpy, {s, s}, {f, f}, {-0.6}},
      {"add", &kernels::add, {s, s}, {f, f}, {}},
      {"mul", &kernels::mul, {s, s}, {f, f}, {}},
      {"where", &kernels::where, {s, s, s}, {DType::u8, f, f}, {}},
      {"sum", &kernels::sum, {s}, {f}, {}},
      {"max", &kernels::max, {s}, {f}, {}},
      {"broadcast", &kernels::broadcast, {{1}}, {f}, {}, {2, 5}},
      {"equal_mask", &kernels::equal_mask, {s, {1}}, {f, f}, {}},
      {"mul_div", &kernels::mul_div, {s, {1}, {1}}, {f, f, f}, {}},
  };
  for (const RuleCase& c : cases) check_rule(c);
}

TEST(DiffRules, EveryStandardKernelHasARuleAndCellsDeclareNone) {
  for (const Kernel* k :
       {&kernels::fill(), &kernels::copy(), &kernels::scale(), &kernels::axpy(), &kernels::add(),
        &kernels::mul(), &kernels::where(), &kernels::sum(), &kernels::max(), &kernels::broadcast(),
        &kernels::equal_mask(), &kernels::mul_div()})
    EXPECT_NE(derivative_of(*k), nullptr) << k->name();
  for (const Kernel* k : {&kernels::cell_or(), &kernels::cell_none(), &kernels::loop_next()}) {
    EXPECT_TRUE(k->def().no_gradient) << k->name();
    EXPECT_EQ(derivative_of(*k), nullptr) << k->name();
  }
}

TEST(DiffRules, HelperKernelsComputeTheirFunctions) {
  Stream stream(cpu);
  const Array x = Array::from(std::vector<double>{1, 3, 2, 3}, {4}, cpu);
  const Array three = Array::from(std::vector<double>{3}, {1}, cpu);
  const Array two = Array::from(std::vector<double>{2}, {1}, cpu);
  Array b = Array::empty({3}, DType::f64, cpu);
  launch_into(kernels::broadcast(), {two}, {}, {b}, stream, ThreadTeam::serial());
  EXPECT_EQ(b.to_vector<double>(), (std::vector<double>{2, 2, 2}));
  EXPECT_EQ(launch(kernels::equal_mask(), {x, three}, {}, stream, ThreadTeam::serial())[0]
                .to_vector<double>(),
            (std::vector<double>{0, 1, 0, 1}));
  EXPECT_EQ(launch(kernels::mul_div(), {x, three, two}, {}, stream, ThreadTeam::serial())[0]
                .to_vector<double>(),
            (std::vector<double>{1.5, 4.5, 3, 4.5}));
  const Array xi = Array::from(std::vector<int32_t>{4, 6}, {2}, cpu);
  const Array zero = Array::from(std::vector<int32_t>{0}, {1}, cpu);
  EXPECT_EQ(launch(kernels::mul_div(), {xi, zero, zero}, {}, stream, ThreadTeam::serial())[0]
                .to_vector<int32_t>(),
            (std::vector<int32_t>{0, 0}));  // an integer division by zero gives 0
  test::expect_throw_with<InvalidArgument>(
      [&] {
        launch(kernels::mul_div(), {x, x, two}, {}, stream, ThreadTeam::serial());
      },
      {"mul_div", "'num'", "one element"});
}

// max shares its cotangent evenly among ties: the entries sum to it.
TEST(DiffRules, MaxSharesTheCotangentAmongTies) {
  const Array x = Array::from(std::vector<double>{1, 5, 2, 5}, {4}, cpu);
  Graph g = Graph::record(
      [&](Recorder& r) {
        Value xv = r.param("x", x);
        r.result(diff::gradients(r, {r.call(kernels::max(), {xv})}, {xv}));
      },
      RecordOptions{.record = true});
  g.build(cpu);
  EXPECT_EQ(g()[0].to_vector<double>(), (std::vector<double>{0, 0.5, 0, 0.5}));
}

TEST(DiffRules, InPlaceOverwritesOfWhatADerivativeReadsAreSaved) {
  const Array x0 = test::random_array({6}, DType::f64, cpu);
  auto body = [&](Recorder& r) {
    Value h = r.empty({6}, DType::f64, "h");
    Value x = r.param("x", x0);
    r.call(kernels::copy(), {x}, buffer(h));
    r.call(kernels::mul(), {h, h}, buffer(h));      // mul's derivative reads h: saved (48 bytes)
    r.call(kernels::scale(), {h, 2.0}, buffer(h));  // reads nothing: no save
    r.call(kernels::mul(), {h, x}, buffer(h));      // saved again (48 bytes)
    Value head = h.slice(0, 2);
    r.call(kernels::scale(), {head, 3.0}, buffer(head));  // scale reads nothing: no save
    r.result(r.call(kernels::sum(), {h}));
  };
  Graph recorded = Graph::record(body, RecordOptions{.record = true});
  EXPECT_EQ(recorded.saved_bytes(), 2 * 6 * sizeof(double));
  int saves = 0;
  for (const NodeInfo& n : recorded.nodes()) saves += n.kind == NodeKind::save;
  EXPECT_EQ(saves, 2);
  // The muls' reads of h now read the copies; x was never overwritten.
  std::vector<Snapshot::State> states;
  for (const NodeInfo& n : recorded.nodes())
    if (n.kernel == "mul")
      for (int slot = 0; slot < 2; ++slot)
        states.push_back(recorded.recording().snapshot(n.id, slot).state);
  using S = Snapshot::State;
  EXPECT_EQ(states, (std::vector<S>{S::saved, S::saved, S::saved, S::intact}));
  Graph plain = Graph::record(body);
  EXPECT_EQ(plain.saved_bytes(), 0u);
  recorded.build(cpu);
  plain.build(cpu);
  EXPECT_EQ(recorded()[0].to_vector<double>(), plain()[0].to_vector<double>());
}

TEST(DiffRules, TheNameMapHoldsParamsLabeledArraysAndResults) {
  const Array x0 = test::random_array({3}, DType::f64, cpu);
  const Array e0 = test::random_array({3}, DType::f64, cpu);
  Graph g = Graph::record(
      [&](Recorder& r) {
        Value x = r.param("x", x0);
        Value h = r.empty({3}, DType::f64, "h");
        r.call(kernels::scale(), {x, 2.0}, buffer(h));
        r.call(kernels::add(), {h, r.external(e0, "state")}, buffer(h));
        Value t = r.call(kernels::mul(), {h, h});  // a plain temporary: not in the map
        r.result(r.call(kernels::sum(), {t}));
      },
      RecordOptions{.record = true});
  const auto& names = g.recording().names();
  std::vector<std::string> keys;
  for (const auto& [k, v] : names) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"h", "result", "result.0", "state", "x"}));
  EXPECT_TRUE(
      Graph::record([&](Recorder& r) { r.result(r.param("x", x0)); }).recording().names().empty());
}

}  // namespace
}  // namespace eagle
