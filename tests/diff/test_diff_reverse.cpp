// Reverse mode over whole recorded graphs (src/diff): a chain, a diamond, in-place buffer=
// updates, an overwrite that cuts the gradient, one-graph training steps, against float64
// central finite differences of the forward graph itself on the CPU; and the refusals, after
// which the forward graph still runs.
#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <string>

#include "eagle/eagle.hpp"
#include "graph_gradients.hpp"
#include "random.hpp"
#include "test_util.hpp"
#include "testing_kernels.hpp"

namespace eagle {
namespace {

using test::expect_throw_with;
const Device cpu = Device::cpu();

void expect_close(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], 1e-5 * (1 + std::abs(want[i]))) << "element " << i;
}

// loss = sum((3x)^2 * w): a chain through a labeled intermediate.
TEST(DiffReverse, AChainAgainstFiniteDifferences) {
  const Array x0 = test::random_array({5}, DType::f64, cpu);
  const Array w0 = test::random_array({5}, DType::f64, cpu);
  Graph g = Graph::record(
      [&](Recorder& r) {
        Value x = r.param("x", x0), w = r.param("w", w0);
        Value y = r.call(kernels::scale(), {x, 3.0});
        Value z = r.empty({5}, DType::f64, "z");
        r.call(kernels::mul(), {y, y}, buffer(z));
        r.result(r.call(kernels::sum(), {r.call(kernels::mul(), {z, w})}));
      },
      RecordOptions{.record = true});
  g.build(cpu);
  g();
  Graph back = diff::reverse(g, {"result"}, {"x", "w", "z"});
  g();
  const std::vector<Array>& grads = back();
  EXPECT_EQ(back.backend(), g.backend());
  const std::vector<double> x = x0.to_vector<double>(), w = w0.to_vector<double>();
  std::vector<double> dz = w;  // d loss / d z
  expect_close(grads[2].to_vector<double>(), dz);
  expect_close(grads[0].to_vector<double>(), test::graph_finite_difference(g, "x", x0));
  expect_close(grads[1].to_vector<double>(), test::graph_finite_difference(g, "w", w0));
  // Replayable: another forward and reverse give the same gradients. (The differences first:
  // they rerun the forward at x +- h, and the reverse reads the last forward's arrays.)
  const std::vector<double> want = test::graph_finite_difference(g, "x", x0);
  g();
  expect_close(back()[0].to_vector<double>(), want);
}

// x read by three nodes: the cotangents are summed. One graph: forward and reverse.
TEST(DiffReverse, ADiamondSumsTheCotangentsOfASharedInput) {
  const Array x0 = test::random_array({4}, DType::f64, cpu);
  Graph g = Graph::record(
      [&](Recorder& r) {
        Value x = r.param("x", x0);
        Value a = r.call(kernels::scale(), {x, 2.0});
        Value b = r.call(kernels::mul(), {x, x});
        Value c = r.call(kernels::axpy(), {a, b, 0.5});  // 0.5 a + b
        Value d = r.call(kernels::mul(), {c, x});
        Value loss = r.call(kernels::sum(), {d});
        r.result({loss, diff::gradients(r, {loss}, {x})[0]});
      },
      RecordOptions{.record = true});
  g.build(cpu);
  const std::vector<double> grad = g()[1].to_vector<double>();
  expect_close(grad, test::graph_finite_difference(g, "x", x0));
  const std::vector<double> x = x0.to_vector<double>();
  for (std::size_t i = 0; i < x.size(); ++i)  // d/dx (x^2 + x^3) = 2x + 3x^2
    EXPECT_NEAR(grad[i], 2 * x[i] + 3 * x[i] * x[i], 1e-12);
}

// h is updated in place, whole and by rows; the derivatives read the saved values.
struct InPlace {
  Value x, w, loss;
};
InPlace record_in_place(Recorder& r, const Array& x0, const Array& w0) {
  Value x = r.param("x", x0), w = r.param("w", w0);
  Value h = r.empty({6}, DType::f64, "h");
  r.call(kernels::copy(), {x}, buffer(h));
  r.call(kernels::mul(), {h, h}, buffer(h));  // h = x^2
  r.call(kernels::mul(), {h, w}, buffer(h));  // h = x^2 w
  Value head = h.slice(0, 3);
  r.call(kernels::mul(), {head, head}, buffer(head));  // rows 0..2 squared
  Value tail = h.slice(3, 6);
  r.call(kernels::where(),
         {r.param("keep", Array::from(std::vector<uint8_t>{1, 0, 1}, {3}, cpu)), tail, head},
         buffer(tail));
  Value loss = r.empty({1}, DType::f64, "loss");
  r.call(kernels::max(), {h}, buffer(loss));
  r.call(kernels::axpy(), {r.call(kernels::sum(), {h}), loss, 1.0}, buffer(loss));
  return {x, w, loss};
}

TEST(DiffReverse, InPlaceBufferUpdatesReadSavedValues) {
  const Array x0 = test::random_array({6}, DType::f64, cpu, 0.5, 1.5);
  const Array w0 = test::random_array({6}, DType::f64, cpu, 0.5, 1.5);
  Graph g = Graph::record([&](Recorder& r) { r.result(record_in_place(r, x0, w0).loss); },
                          RecordOptions{.record = true});
  EXPECT_GT(g.saved_bytes(), 0u);
  g.build(cpu);
  g();
  Graph back = diff::reverse(g, {"loss"}, {"x", "w"});
  g();
  const std::vector<double> dx = back()[0].to_vector<double>();
  const std::vector<double> dw = back()[1].to_vector<double>();
  expect_close(dx, test::graph_finite_difference(g, "x", x0));
  expect_close(dw, test::graph_finite_difference(g, "w", w0));
  // The same in one graph.
  Graph one = Graph::record(
      [&](Recorder& r) {
        const InPlace f = record_in_place(r, x0, w0);
        const std::vector<Value> grads = diff::gradients(r, {f.loss}, {f.x, f.w});
        r.result({f.loss, grads[0], grads[1]});
      },
      RecordOptions{.record = true});
  one.build(cpu);
  expect_close(one()[1].to_vector<double>(), dx);
  expect_close(one()[2].to_vector<double>(), dw);
}

// A whole-buffer overwrite ends the dependency: what h held before the fill gets no gradient.
TEST(DiffReverse, AnOverwriteCutsTheGradient) {
  const Array x0 = test::random_array({3}, DType::f64, cpu);
  Graph g = Graph::record(
      [&](Recorder& r) {
        Value x = r.param("x", x0);
        Value h = r.empty({3}, DType::f64, "h");
        r.call(kernels::scale(), {x, 5.0}, buffer(h));
        r.call(kernels::fill(), {2.0}, buffer(h));
        r.call(kernels::mul(), {h, x}, buffer(h));
        Value loss = r.call(kernels::sum(), {h});
        r.result({loss, diff::gradients(r, {loss}, {x})[0]});
      },
      RecordOptions{.record = true});
  g.build(cpu);
  EXPECT_EQ(g()[1].to_vector<double>(), (std::vector<double>{2, 2, 2}));
}

// One launch per training step: forward, reverse and an SGD update of an external weight.
TEST(DiffReverse, OneGraphTrainingStep) {
  const std::vector<double> xs = test::random_values(4), target = test::random_values(4);
  const std::vector<double> w_init = test::random_values(4);
  Array w0 = Array::from(w_init, {4}, cpu);
  const double lr = 0.1;
  Graph step = Graph::record(
      [&](Recorder& r) {
        Value w = r.external(w0, "w");
        Value x = r.param("x", Array::from(xs, {4}, cpu));
        Value t = r.param("target", Array::from(target, {4}, cpu));
        Value err = r.call(kernels::axpy(), {t, r.call(kernels::mul(), {w, x}), -1.0});
        Value loss = r.call(kernels::sum(), {r.call(kernels::mul(), {err, err})});
        Value dw = diff::gradients(r, {loss}, {w})[0];
        r.call(kernels::axpy(), {dw, w, -lr}, buffer(w));  // w -= lr dw, in place
        r.result(loss);
      },
      RecordOptions{.record = true});
  EXPECT_EQ(step.saved_bytes(), 0u);  // the update comes after the reverse: nothing to save
  step.build(cpu);
  std::vector<double> w = w_init;
  for (int k = 0; k < 5; ++k) {
    double loss = 0;
    std::vector<double> grad(4);
    for (std::size_t i = 0; i < 4; ++i) {
      const double e = w[i] * xs[i] - target[i];
      loss += e * e;
      grad[i] = 2 * e * xs[i];
    }
    EXPECT_NEAR(step()[0].to_vector<double>()[0], loss, 1e-12) << "step " << k;
    for (std::size_t i = 0; i < 4; ++i) w[i] -= lr * grad[i];
  }
  expect_close(w0.to_vector<double>(), w);
}

// The nodes of a derivative carry the scope "d(<label>)" of the node they differentiate, inside
// the scope open around the reverse pass: traces and to_json tell the backwards apart.
TEST(DiffReverse, ADerivativesNodesAreScopedByTheNodeTheyDifferentiate) {
  const Array x0 = test::random_array({4}, DType::f64, cpu);
  std::size_t forward_nodes = 0;
  Graph g = Graph::record(
      [&](Recorder& r) {
        Value x = r.param("x", x0);
        Value y = r.call(kernels::scale(), {x, 3.0});
        Value loss = r.call(kernels::sum(), {r.call(kernels::mul(), {y, y})});
        forward_nodes = r.recording().nodes().size();
        auto scope = r.scope("backward");
        r.result(diff::gradients(r, {loss}, {x})[0]);
      },
      RecordOptions{.record = true});
  std::set<std::string> forward_labels;
  for (std::size_t i = 0; i < forward_nodes; ++i) forward_labels.insert(g.nodes()[i].label);
  std::set<std::string> derivative_scopes;
  for (std::size_t i = forward_nodes; i < g.nodes().size(); ++i) {
    const std::string& scope = g.nodes()[i].scope;
    if (scope == "backward") continue;  // the cotangents' sums and seeds
    ASSERT_EQ(scope.rfind("backward/d(", 0), 0u) << scope;
    const std::string of = scope.substr(11, scope.size() - 12);
    EXPECT_TRUE(forward_labels.count(of)) << "scope " << scope << " names no forward node";
    derivative_scopes.insert(of);
  }
  EXPECT_EQ(derivative_scopes.size(), 3u);  // scale, mul and sum each have their derivative
  g.build(cpu);
  std::vector<double> want = x0.to_vector<double>();
  for (double& v : want) v *= 18;  // d/dx sum((3x)^2)
  expect_close(g()[0].to_vector<double>(), want);
}

// A kernel of one's own declares its derivative as recorded calls (vjp_rule).
TEST(DiffReverse, AKernelOfOnesOwnDeclaresItsDerivative) {
  KernelDef def = test::cpu_only_square().def();  // out = x * x, f32, CPU
  def.derivative = vjp_rule(
      [](Recorder& r, const VjpArgs& a) -> std::vector<std::optional<Value>> {
        const Value gx = r.call(kernels::mul(), {*a.cotangents[1], a.arrays[0]});
        return {r.call(kernels::scale(), {gx, 2.0}), std::nullopt};  // dx = 2 x g
      },
      {0});
  const Kernel square(def);
  const Array x0 = test::random_array({4}, DType::f32, cpu);
  Graph g = Graph::record(
      [&](Recorder& r) {
        Value x = r.param("x", x0);
        Value loss = r.call(kernels::sum(), {r.call(square, {x})});
        r.result(diff::gradients(r, {loss}, {x}));
      },
      RecordOptions{.record = true});
  g.build(cpu);
  const std::vector<float> x = x0.to_vector<float>(), dx = g()[0].to_vector<float>();
  for (std::size_t i = 0; i < x.size(); ++i) EXPECT_FLOAT_EQ(dx[i], 2 * x[i]);
}

// ---- refusals, each leaving the forward graph usable

// After gradients(), writes no longer save: a second reverse reading an overwritten value is
// refused rather than reading the new one.
TEST(DiffReverse, AValueOverwrittenAfterItsReverseIsNotReadAgain) {
  const Array x0 = test::random_array({3}, DType::f64, cpu);
  Graph::record(
      [&](Recorder& r) {
        Value x = r.param("x", x0);
        Value h = r.empty({3}, DType::f64, "h");
        r.call(kernels::copy(), {x}, buffer(h));
        Value loss = r.call(kernels::sum(), {r.call(kernels::mul(), {h, h})});
        diff::gradients(r, {loss}, {x});
        r.call(kernels::fill(), {1.0}, buffer(h));  // overwrites what mul's derivative reads
        const std::size_t nodes = r.recording().nodes().size();
        expect_throw_with<RecordError>(
            [&] { diff::gradients(r, {loss}, {x}); },
            {"kernel mul", "overwrote", "after Recorder::release_saves"});
        EXPECT_EQ(r.recording().nodes().size(), nodes);  // nothing was recorded
        r.result(loss);
      },
      RecordOptions{.record = true});
}

Graph small_forward(const Array& x0) {
  return Graph::record(
      [&](Recorder& r) {
        Value x = r.param("x", x0);
        Value t = r.call(kernels::scale(), {x, 2.0});  // a plain temporary
        r.result(r.call(kernels::sum(), {r.call(kernels::mul(), {t, x})}));
      },
      RecordOptions{.record = true});
}

TEST(DiffReverse, ATemporaryInSeedsOrWrtIsRefusedWithTheWayOut) {
  const Array x0 = test::random_array({3}, DType::f64, cpu);
  Graph g = small_forward(x0);
  g.build(cpu);
  const double before = g()[0].to_vector<double>()[0];
  expect_throw_with<InvalidArgument>(
      [&] { diff::reverse(g, {"scale#1.out"}, {"x"}); },
      {"seeds name 'scale#1.out'", "not in the graph's name map", "buffer="});
  expect_throw_with<InvalidArgument>([&] { diff::reverse(g, {"result"}, {"t"}); },
                                     {"wrt name 't'", "buffer="});
  EXPECT_EQ(g()[0].to_vector<double>()[0], before);
  Graph plain = Graph::record([&](Recorder& r) { r.result(r.param("x", x0)); });
  plain.build(cpu);
  expect_throw_with<InvalidArgument>([&] { diff::reverse(plain, {"result"}, {"x"}); },
                                     {"RecordOptions{.record = true}"});
  Graph unbuilt = small_forward(x0);
  expect_throw_with<InvalidArgument>([&] { diff::reverse(unbuilt, {"result"}, {"x"}); },
                                     {"build the forward graph first"});
}

TEST(DiffReverse, AKernelWithoutADerivativeOnThePathIsRefused) {
  const Array x0 = test::random_array({3}, DType::f32, cpu);
  const Array y0 = test::random_array({3}, DType::f32, cpu);
  Graph g = Graph::record(
      [&](Recorder& r) {
        Value x = r.param("x", x0), y = r.param("y", y0);
        Value sq = r.call(test::cpu_only_square(), {y});  // no derivative, off x's path
        Value s = r.call(kernels::mul(), {x, sq});
        Value q = r.call(test::cpu_only_square(), {s}, CallOptions{{}, "square s"});
        r.result({r.call(kernels::sum(), {s}), r.call(kernels::sum(), {q})});
      },
      RecordOptions{.record = true});
  g.build(cpu);
  const std::vector<float> before = g()[1].to_vector<float>();
  // Off the path: fine (d/dx sum(x y^2) = y^2).
  Graph ok = diff::reverse(g, {"result.0"}, {"x"});
  g();
  const std::vector<float> y = y0.to_vector<float>(), dx = ok()[0].to_vector<float>();
  for (std::size_t i = 0; i < y.size(); ++i) EXPECT_FLOAT_EQ(dx[i], y[i] * y[i]);
  // On the path: refused, naming the node and the kernel.
  expect_throw_with<NotSupported>([&] { diff::reverse(g, {"result.1"}, {"x"}); },
                                  {"'square s'", "kernel square", "no derivative"});
  EXPECT_EQ(g()[1].to_vector<float>(), before);
}

}  // namespace
}  // namespace eagle
