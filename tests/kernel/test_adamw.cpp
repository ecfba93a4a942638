// Tests of the optimizer kernels (eagle/kernel/optim.hpp): adamw over several tensors of awkward
// sizes, recorded with step_count as one graph and replayed for several steps on fresh random
// gradients, against a float64 AdamW computed here; eager launches; the refusals.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "eagle/eagle.hpp"
#include "eagle/kernel/optim.hpp"
#include "kernel_check.hpp"
#include "test_util.hpp"

namespace eagle {
namespace {

using test::expect_invalid;

struct Hyper {
  double lr = 0.01, beta1 = 0.9, beta2 = 0.99, eps = 1e-6, wd = 0.1;
};

// The float64 AdamW step t (>= 1) of one tensor.
void adamw_reference(const Hyper& h, int64_t t, std::vector<double>& p,
                     const std::vector<double>& g, std::vector<double>& m, std::vector<double>& v) {
  const double bc1 = 1 - std::pow(h.beta1, static_cast<double>(t));
  const double bc2 = 1 - std::pow(h.beta2, static_cast<double>(t));
  for (std::size_t i = 0; i < p.size(); ++i) {
    p[i] *= 1 - h.lr * h.wd;
    m[i] = h.beta1 * m[i] + (1 - h.beta1) * g[i];
    v[i] = h.beta2 * v[i] + (1 - h.beta2) * g[i] * g[i];
    p[i] -= h.lr / bc1 * m[i] / (std::sqrt(v[i]) / std::sqrt(bc2) + h.eps);
  }
}

// |got - want| <= tol (1 + |want|) elementwise.
void expect_near_all(const std::vector<double>& got, const std::vector<double>& want, double tol,
                     const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  std::size_t bad = 0, first = 0;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!(std::abs(got[i] - want[i]) <= tol * (1 + std::abs(want[i]))) && bad++ == 0) first = i;
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " elements differ; the first is " << first
                     << ": got " << got[first] << ", want " << want[first];
}

// One eager step, waited for: the step count, then adamw over one tensor's (p, g, m, v).
void eager_step(const Hyper& h, const Array& count, const Array& p, const Array& g, const Array& m,
                const Array& v, Stream& stream, ThreadTeam& team) {
  launch_into(kernels::step_count(), {count}, {}, {}, stream, team);
  launch_into(kernels::adamw(1), {count, p, g, m, v}, {h.lr, h.beta1, h.beta2, h.eps, h.wd}, {},
              stream, team);
  stream.synchronize();
}

class Adamw : public test::OnDevice {};
EAGLE_ON_EVERY_DEVICE(Adamw);

TEST_P(Adamw, RecordedStepsMatchFloat64OverSeveralTensors) {
  // Sizes around the CUDA chunk (4096 elements, moved 4 at a time) and a 2-D tensor.
  const std::vector<Shape> shapes = {{5}, {33, 7}, {1025}, {4097}, {8195}};
  const Hyper h;
  const int n = static_cast<int>(shapes.size());
  std::vector<Array> p, g, m, v;
  std::vector<std::vector<double>> pw, mw, vw;
  for (const Shape& s : shapes) {
    p.push_back(test::random_array(s, DType::f32, device()));
    g.push_back(test::random_array(s, DType::f32, device()));
    // Moments as after some earlier steps: m of either sign, v positive.
    m.push_back(test::random_array(s, DType::f32, device(), -0.1, 0.1));
    v.push_back(test::random_array(s, DType::f32, device(), 0.001, 0.01));
    pw.push_back(p.back().to_vector<double>());
    mw.push_back(m.back().to_vector<double>());
    vw.push_back(v.back().to_vector<double>());
  }
  const Array count = Array::from(std::vector<int64_t>{3}, {1}, device());  // steps taken so far
  Graph step = Graph::record([&](Recorder& r) {
    const Value c = r.external(count, "count");
    r.call(kernels::step_count(), {c});
    std::vector<Arg> args = {c};
    for (int j = 0; j < n; ++j) {
      const std::string s = std::to_string(j);
      args.emplace_back(r.external(p[static_cast<std::size_t>(j)], "p" + s));
      args.emplace_back(r.param("g" + s, g[static_cast<std::size_t>(j)]));
      args.emplace_back(r.external(m[static_cast<std::size_t>(j)], "m" + s));
      args.emplace_back(r.external(v[static_cast<std::size_t>(j)], "v" + s));
    }
    for (double x : {h.lr, h.beta1, h.beta2, h.eps, h.wd}) args.emplace_back(x);
    r.call_all(kernels::adamw(n), args);
  });
  step.build(device());
  for (int64_t t = 4; t <= 8; ++t) {
    SCOPED_TRACE("step " + std::to_string(t));
    if (t > 4)  // fresh gradients for every step after the first
      for (int j = 0; j < n; ++j)
        g[static_cast<std::size_t>(j)].copy_from(
            test::random_array(shapes[static_cast<std::size_t>(j)], DType::f32, device()));
    step();
    for (int j = 0; j < n; ++j) {
      const std::size_t k = static_cast<std::size_t>(j);
      adamw_reference(h, t, pw[k], g[k].to_vector<double>(), mw[k], vw[k]);
      expect_near_all(p[k].to_vector<double>(), pw[k], 2e-6, "param " + std::to_string(j));
      expect_near_all(m[k].to_vector<double>(), mw[k], 2e-6, "m " + std::to_string(j));
      expect_near_all(v[k].to_vector<double>(), vw[k], 2e-6, "v " + std::to_string(j));
    }
    EXPECT_EQ(count.to_vector<int64_t>()[0], t);
  }
}

TEST_P(Adamw, EagerLaunchOfOneTensorFromZeroMoments) {
  Stream stream(device());
  ThreadTeam team(2);
  const Hyper h{.lr = 0.1, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-8, .wd = 0.0};
  const Array p = test::random_array({300}, DType::f32, device());
  const Array g = test::random_array({300}, DType::f32, device());
  const Array m = Array::from(std::vector<float>(300, 0.0f), {300}, device());
  const Array v = Array::from(std::vector<float>(300, 0.0f), {300}, device());
  const Array count = Array::from(std::vector<int64_t>{0}, {1}, device());
  std::vector<double> pw = p.to_vector<double>(), mw(300, 0.0), vw(300, 0.0);
  eager_step(h, count, p, g, m, v, stream, team);
  adamw_reference(h, 1, pw, g.to_vector<double>(), mw, vw);
  expect_near_all(p.to_vector<double>(), pw, 2e-6, "param");
  // The first step moves every element by about lr (m / sqrt(v) = sign(g) after bias correction).
  EXPECT_EQ(count.to_vector<int64_t>()[0], 1);
}

// Views starting one element into their buffers (not 16-byte aligned on a GPU, which then moves
// elements one at a time), over more than one chunk, with a tail: the same float64 step.
TEST_P(Adamw, ViewsOffsetByOneElementMatchFloat64) {
  Stream stream(device());
  ThreadTeam team(2);
  const Hyper h;
  const int64_t n = 9001;
  auto view = [&](double lo, double hi) {
    return test::random_array({n + 1}, DType::f32, device(), lo, hi).slice(0, 1, n + 1);
  };
  const Array p = view(-1, 1), g = view(-1, 1), m = view(-0.1, 0.1), v = view(0.001, 0.01);
  const Array count = Array::from(std::vector<int64_t>{2}, {1}, device());
  std::vector<double> pw = p.to_vector<double>(), mw = m.to_vector<double>(),
                      vw = v.to_vector<double>();
  eager_step(h, count, p, g, m, v, stream, team);
  adamw_reference(h, 3, pw, g.to_vector<double>(), mw, vw);
  expect_near_all(p.to_vector<double>(), pw, 2e-6, "param");
  expect_near_all(m.to_vector<double>(), mw, 2e-6, "m");
  expect_near_all(v.to_vector<double>(), vw, 2e-6, "v");
}

TEST(AdamwRefusals, BadHyperparametersShapesAndCounts) {
  const Device cpu = Device::cpu();
  Stream stream(cpu);
  ThreadTeam team(1);
  const Array p = Array::from(std::vector<float>{1, 2}, {2}, cpu);
  const Array g = Array::from(std::vector<float>{1, 2}, {2}, cpu);
  const Array m = Array::from(std::vector<float>{0, 0}, {2}, cpu);
  const Array v = Array::from(std::vector<float>{0, 0}, {2}, cpu);
  const Array v3 = Array::from(std::vector<float>{0, 0, 0}, {3}, cpu);
  const Array count = Array::from(std::vector<int64_t>{1}, {1}, cpu);
  const Array count32 = Array::from(std::vector<int32_t>{1}, {1}, cpu);
  auto run = [&](const Array& c, const Array& vv, double beta1, double eps) {
    launch_into(kernels::adamw(1), {c, p, g, m, vv}, {0.1, beta1, 0.99, eps, 0.0}, {}, stream,
                team);
  };
  expect_invalid([&] { run(count, v, 1.0, 1e-8); }, "'beta1' must be in [0, 1)");
  expect_invalid([&] { run(count, v, 0.9, 0.0); }, "'eps' must be > 0");
  expect_invalid([&] { run(count, v3, 0.9, 1e-8); }, "argument 'v0' has shape");
  expect_invalid([&] { run(count32, v, 0.9, 1e-8); }, "'count' must be a one-cell i64 array");
  expect_invalid([] { kernels::adamw(0); }, "tensors must be in [1, 6]");
  expect_invalid([] { kernels::adamw(kernels::kAdamwMaxTensors + 1); },
                 "tensors must be in [1, 6]");
  // Nothing was changed by the refused calls.
  EXPECT_EQ(p.to_vector<float>(), (std::vector<float>{1, 2}));
  EXPECT_TRUE(kernels::adamw(2).def().no_gradient);
  EXPECT_TRUE(kernels::step_count().def().no_gradient);
}

}  // namespace
}  // namespace eagle
