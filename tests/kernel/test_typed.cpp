// Tests of the typed kernel form: one body runs on the CPU and on the GPU and computes the same
// function; the signature is the parameter list; each side exists only when it has a body.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <vector>

#include "eagle/eagle.hpp"
#include "test_util.hpp"
#include "typed_kernels.hpp"

namespace eagle {
namespace {

using test::expect_throw_with;

class Typed : public test::OnDeviceWithStream {};
EAGLE_ON_EVERY_DEVICE(Typed);

TEST_P(Typed, SignatureIsTheParameterList) {
  const KernelDef& d = test::typed_weighted_sum11().def();
  ASSERT_EQ(d.arrays.size(), 12u);
  ASSERT_EQ(d.scalars.size(), 3u);
  EXPECT_EQ(d.arrays[10].name, "a10");
  EXPECT_EQ(d.arrays[10].access, Access::read);
  EXPECT_EQ(d.arrays[11].name, "out");
  EXPECT_EQ(d.arrays[11].access, Access::write);
  EXPECT_EQ(d.scalars[0].kind, ScalarKind::real);
  EXPECT_EQ(d.scalars[2].name, "shift");
  EXPECT_EQ(d.scalars[2].kind, ScalarKind::integer);
  const KernelDef& c = test::typed_countdown().def();
  EXPECT_EQ(c.arrays[0].access, Access::read_write);
  EXPECT_TRUE(test::typed_strided_copy().def().arrays[0].strided);
  EXPECT_FALSE(test::typed_axpy().def().arrays[0].strided);
}

TEST_P(Typed, AxpyMatchesTheFormulaForEveryType) {
  for (DType d : {DType::f32, DType::f64}) {
    SCOPED_TRACE(dtype_name(d));
    const Shape shape{3, 40001};  // past the CPU grain and many GPU blocks
    const Array x = test::random_array(shape, d, device());
    const Array y = test::random_array(shape, d, device());
    const Array out = Array::empty(shape, d, device());
    test::poison(out);
    launch_into(test::typed_axpy(), {x, y}, {0.75}, {out}, stream(), team_);
    stream().synchronize();
    const auto hx = x.to_vector<double>(), hy = y.to_vector<double>();
    std::vector<double> want(hx.size());
    for (std::size_t i = 0; i < want.size(); ++i) want[i] = 0.75 * hx[i] + hy[i];
    EXPECT_CLOSE(out.to_vector<double>(), want, test::tolerance(d));
  }
}

TEST_P(Typed, TwelveArraysAndThreeScalars) {
  for (DType d : {DType::f32, DType::f64}) {
    SCOPED_TRACE(dtype_name(d));
    std::vector<Array> in;
    std::vector<std::vector<double>> host;
    for (int k = 0; k < 11; ++k) {
      in.push_back(test::random_array({1000}, d, device()));
      host.push_back(in.back().to_vector<double>());
    }
    const std::vector<Array> outs =
        launch(test::typed_weighted_sum11(), in, {0.5, -3.0, int64_t{4}}, stream(), team_);
    stream().synchronize();
    std::vector<double> want(1000, 0.5 * -3.0 + 4.0);
    for (int k = 0; k < 11; ++k)
      for (std::size_t i = 0; i < want.size(); ++i) want[i] += (k + 1) * host[k][i];
    EXPECT_CLOSE(outs[0].to_vector<double>(), want, 20 * test::tolerance(d));
  }
}

TEST_P(Typed, IntegerScalarsStayExact) {
  for (DType d : {DType::i64, DType::i32}) {
    const Array x = test::random_array({777}, d, device());
    const auto out = launch(test::typed_shift(), {x}, {int64_t{1000003}}, stream(), team_);
    stream().synchronize();
    const auto hx = x.to_vector<int64_t>();
    const auto got = out[0].to_vector<int64_t>();
    for (std::size_t i = 0; i < hx.size(); ++i) ASSERT_EQ(got[i], hx[i] + 1000003) << i;
  }
  expect_throw_with<NotSupported>(
      [&] {
        launch(test::typed_shift(), {Array::empty({3}, DType::f32, device())}, {int64_t{1}},
               stream(), team_);
      },
      {"typed_shift", "(f32,f32)", "not served", "(i64,i64)", "(i32,i32)"});
}

TEST_P(Typed, StridedViewIsReadThroughItsStrides) {
  const Array m = test::random_array({6, 9}, DType::f32, device());
  const Array cols = m.slice(1, 2, 7);  // [6, 5] with row stride 9
  ASSERT_FALSE(cols.is_contiguous());
  const auto out = launch(test::typed_strided_copy(), {cols}, {}, stream(), team_);
  stream().synchronize();
  const auto hm = m.to_vector<float>();
  const auto got = out[0].to_vector<float>();
  ASSERT_EQ(got.size(), 30u);
  for (int r = 0; r < 6; ++r)
    for (int c = 0; c < 5; ++c) EXPECT_EQ(got[r * 5 + c], hm[r * 9 + c + 2]) << r << "," << c;
  // A parameter that does not declare strides refuses the same view.
  expect_throw_with<InvalidArgument>(
      [&] {
        launch(test::typed_axpy(), {cols, cols}, {1.0}, stream(), team_);
      },
      {"typed_axpy", "'x'", "contiguous", "strided"});
}

TEST_P(Typed, ReadWriteAccessorUpdatesInPlace) {
  const Array remaining = Array::from(std::vector<uint32_t>{3}, {1}, device());
  for (uint32_t want = 2; want != static_cast<uint32_t>(-1); --want) {
    const auto going = launch(test::typed_countdown(), {remaining}, {}, stream(), team_);
    stream().synchronize();
    EXPECT_EQ(remaining.to_vector<uint32_t>()[0], want);
    EXPECT_EQ(going[0].to_vector<uint32_t>()[0], want > 0 ? 1u : 0u);
    if (want == 0) break;
  }
}

TEST_P(Typed, ASideWithoutABodyIsRefused) {
  const Array x = test::random_array({64}, DType::f32, device());
  const Kernel& missing = device().is_cpu() ? test::typed_cuda_only() : test::typed_cpu_only();
  const Kernel& present = device().is_cpu() ? test::typed_cpu_only() : test::typed_cuda_only();
  const char* side = device().is_cpu() ? "CPU" : "CUDA";
  expect_throw_with<NotSupported>([&] { launch(missing, {x}, {}, stream(), team_); },
                                  {missing.name(), side});
  // A graph holding it is refused at build, naming the node, not at launch.
  Graph g = Graph::record([&](Recorder& r) { r.result(r.call(missing, {r.param("x", x)})); });
  expect_throw_with<NotSupported>([&] { g.build(device()); },
                                  {"Graph::build", "node 0", missing.name(), side});
  EXPECT_FALSE(g.built());
  // The other one runs.
  const auto out = launch(present, {x}, {}, stream(), team_);
  stream().synchronize();
  const auto hx = x.to_vector<double>();
  const double factor = device().is_cpu() ? 3.0 : 2.0;
  std::vector<double> want(hx.size());
  for (std::size_t i = 0; i < hx.size(); ++i) want[i] = factor * hx[i];
  EXPECT_CLOSE(out[0].to_vector<double>(), want, 1e-6);
}

TEST_P(Typed, RecordedAndReplayedInAGraph) {
  const Array x = test::random_array({5000}, DType::f32, device());
  const Array y = test::random_array({5000}, DType::f32, device());
  std::vector<Array> in;
  for (int k = 0; k < 11; ++k) in.push_back(k % 2 ? x : y);
  Graph g = Graph::record([&](Recorder& r) {
    const Value vx = r.param("x", x), vy = r.param("y", y);
    std::vector<Arg> args;
    for (int k = 0; k < 11; ++k) args.emplace_back(k % 2 ? vx : vy);
    args.emplace_back(2.0);
    args.emplace_back(0.25);
    args.emplace_back(int64_t{-1});
    const Value s = r.call(test::typed_weighted_sum11(), args);
    r.result(r.call(test::typed_axpy(), {s, vx, 0.5}));
  });
  g.build(device());
  const auto& out = g();
  const auto hx = x.to_vector<double>(), hy = y.to_vector<double>();
  std::vector<double> want(hx.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    double s = 2.0 * 0.25 - 1.0;
    for (int k = 0; k < 11; ++k) s += (k + 1) * (k % 2 ? hx[i] : hy[i]);
    want[i] = 0.5 * s + hx[i];
  }
  EXPECT_CLOSE(out[0].to_vector<double>(), want, 1e-5);
}

}  // namespace
}  // namespace eagle
