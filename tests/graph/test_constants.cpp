// Recorder::constant: one fill per value, dtype and arm; separate arms, fork branches and loop
// bodies get their own; writing one is refused; a rolled-back one is not handed out again; and
// planned derivatives share theirs across calls (one fill per constant, not one per call).
#include <gtest/gtest.h>

#include <algorithm>

#include "eagle/eagle.hpp"
#include "eagle/engines/planned_kernel.hpp"
#include "test_util.hpp"

namespace eagle {
namespace {

using test::expect_throw_with;

int fills(const Graph& g) {
  return static_cast<int>(std::count_if(g.nodes().begin(), g.nodes().end(),
                                        [](const NodeInfo& n) { return n.kernel == "fill"; }));
}

TEST(Constants, OneFillPerValueAndDtypeInAnArm) {
  Graph g = Graph::record([&](Recorder& r) {
    const Value a = r.constant(0.5, DType::f32), b = r.constant(0.5, DType::f32);
    const Value c = r.constant(0.5, DType::f64), d = r.constant(-2.0, DType::f32);
    EXPECT_EQ(a.buffer(), b.buffer());
    EXPECT_NE(a.buffer(), c.buffer());
    EXPECT_NE(a.buffer(), d.buffer());
    EXPECT_EQ(a.shape(), Shape{});
    EXPECT_EQ(c.dtype(), DType::f64);
    r.result({b, c, d});
  });
  EXPECT_EQ(fills(g), 3);
  g.build(Device::cpu());
  const std::vector<Array> out = g();
  EXPECT_EQ(out[0].to_vector<double>(), std::vector<double>{0.5});
  EXPECT_EQ(out[1].to_vector<double>(), std::vector<double>{0.5});
  EXPECT_EQ(out[2].to_vector<double>(), std::vector<double>{-2.0});
}

TEST(Constants, EachArmBranchAndBodyFillsItsOwn) {
  const Array flag = Array::from(std::vector<uint32_t>{1}, {1}, Device::cpu());
  Graph g = Graph::record([&](Recorder& r) {
    const Value top = r.constant(3.0, DType::f32);
    const Value out = r.empty({}, DType::f32, "out");
    r.if_(
        r.param("flag", flag),
        [&] {
          const Value in_then = r.constant(3.0, DType::f32);
          EXPECT_NE(in_then.buffer(), top.buffer());  // the arm may not run: its own fill
          EXPECT_EQ(r.constant(3.0, DType::f32).buffer(), in_then.buffer());
          r.call(kernels::scale(), {in_then, 2.0}, buffer(out));
        },
        [&] {
          const Value in_else = r.constant(3.0, DType::f32);
          EXPECT_NE(in_else.buffer(), top.buffer());
          r.call(kernels::scale(), {in_else, 5.0}, buffer(out));
        });
    std::vector<int> branch_buffers;
    r.parallel({[&](Branch&) { branch_buffers.push_back(r.constant(3.0, DType::f32).buffer()); },
                [&](Branch&) { branch_buffers.push_back(r.constant(3.0, DType::f32).buffer()); }});
    EXPECT_NE(branch_buffers[0], branch_buffers[1]);  // concurrent branches: no shared write
    r.for_(2, [&] { EXPECT_NE(r.constant(3.0, DType::f32).buffer(), top.buffer()); });
    EXPECT_EQ(r.constant(3.0, DType::f32).buffer(), top.buffer());  // back at the top: shared
    r.result(out);
  });
  // top, then, else, two branches, the loop body; and for_'s own four cells (remaining, going,
  // stop, and skip in its body)
  EXPECT_EQ(fills(g), 6 + 4);
  g.build(Device::cpu());
  EXPECT_EQ(g()[0].to_vector<double>(), std::vector<double>{6.0});
  g.bind("flag", Array::from(std::vector<uint32_t>{0}, {1}, Device::cpu()));
  EXPECT_EQ(g()[0].to_vector<double>(), std::vector<double>{15.0});
}

TEST(Constants, WritingOneIsRefusedAndChangesNothing) {
  Graph g = Graph::record([&](Recorder& r) {
    const Value c = r.constant(1.5, DType::f32);
    const std::size_t nodes = r.recording().nodes().size();
    expect_throw_with<InvalidArgument>([&] { r.call(kernels::fill(), {4.0}, buffer(c)); },
                                       {"fill", "'out'", "Recorder::constant", "read only"});
    expect_throw_with<InvalidArgument>(
        [&] {
          r.call(kernels::axpy(), {c, c, 2.0}, buffer(c));
        },
        {"axpy", "Recorder::constant", "read only"});
    EXPECT_EQ(r.recording().nodes().size(), nodes);
    r.result(r.call(kernels::scale(), {c, 2.0}));
  });
  g.build(Device::cpu());
  EXPECT_EQ(g()[0].to_vector<double>(), std::vector<double>{3.0});
}

TEST(Constants, OneMadeByARolledBackCallIsNotHandedOutAgain) {
  Graph g = Graph::record([&](Recorder& r) {
    Value lost;
    EXPECT_THROW(r.atomically([&] {
      lost = r.constant(7.0, DType::f32);
      throw std::runtime_error("the caller's own error");
    }),
                 std::runtime_error);
    const Value c = r.constant(7.0, DType::f32);  // filled again, not the dead value
    r.result(r.call(kernels::scale(), {c, 1.0}));
  });
  EXPECT_EQ(fills(g), 1);
  g.build(Device::cpu());
  EXPECT_EQ(g()[0].to_vector<double>(), std::vector<double>{7.0});
}

// The gradient of gelu_tanh reads scalar constants: three layers' derivatives fill each once, as
// one layer's do.
TEST(Constants, PlannedDerivativesShareTheirConstants) {
  auto fills_with_layers = [](int layers) {
    const Array x0 = test::random_array({4, 3}, DType::f32, Device::cpu());
    Graph g = Graph::record(
        [&](Recorder& r) {
          const Value xv = r.param("x", x0);
          // One planned call per layer, as planned_segments cuts a graph into pieces.
          Value y = xv;
          for (int i = 0; i < layers; ++i) {
            op::Graph one("gelu_tanh");
            one.pointwise("gelu_tanh", one.tensor({"x", {4, 3}, DType::f32})).set_output(true);
            y = r.call(engines::planned_kernel(one), {y});
          }
          const Value loss = r.call(kernels::sum(), {y});
          r.result(diff::gradients(r, {loss}, {xv}));
        },
        RecordOptions{.record = true});
    return fills(g);
  };
  const int one = fills_with_layers(1);
  EXPECT_GT(one, 1);  // the seed and gelu_tanh's constants
  EXPECT_EQ(fills_with_layers(3), one);
}

}  // namespace
}  // namespace eagle
