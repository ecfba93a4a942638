// Cutting an op::Graph into segments one engine family serves (src/engines/graph_segments.cpp):
// runs of pointwise nodes together, every other node alone, tensors crossing segments become
// outputs and inputs, and running the segments in order computes what the whole graph does.
#include <gtest/gtest.h>

#include <map>

#include "eagle/engines/builtin.hpp"
#include "engines/graph_segments.hpp"
#include "planned_runs.hpp"
#include "test_util.hpp"

namespace eagle {
namespace {

using op::Tensor;

TEST(GraphSegments, PointwiseRunsShareASegmentAndCrossingTensorsBecomeOperands) {
  op::Graph g("mixed");
  const Tensor a = g.tensor({"a", {3, 4}, DType::f64});
  const Tensor b = g.tensor({"b", {4, 2}, DType::f64});
  const Tensor c = g.matmul(a, b);
  const Tensor d = g.pointwise("add", g.pointwise("gelu", c), c);
  const Tensor s = g.op("softmax", {{"x", d}}).at("y");
  g.pointwise("mul", s, d).set_output(true).set_name("y");
  const std::vector<engines::detail::Segment> segs = engines::detail::segments(g);
  ASSERT_EQ(segs.size(), 4u);
  EXPECT_EQ(segs[0].graph.nodes().size(), 1u);  // matmul
  EXPECT_EQ(segs[1].graph.nodes().size(), 2u);  // gelu, add
  EXPECT_EQ(segs[2].graph.nodes().size(), 1u);  // softmax
  EXPECT_EQ(segs[3].graph.nodes().size(), 1u);  // mul
  EXPECT_EQ(segs[0].outputs, std::vector<int64_t>{c.uid()});
  EXPECT_EQ(segs[1].inputs, std::vector<int64_t>{c.uid()});
  EXPECT_EQ(segs[1].outputs, std::vector<int64_t>{d.uid()});  // gelu's output stays inside

  // The segments run in order give the whole graph's output.
  test::Arrays values = {{a.uid(), test::random_array({3, 4}, DType::f64, Device::cpu())},
                         {b.uid(), test::random_array({4, 2}, DType::f64, Device::cpu())}};
  const test::Arrays whole = test::reference(g, values);
  for (const engines::detail::Segment& seg : segs) {
    test::Arrays in;
    const std::vector<Tensor> ops = seg.graph.operand_tensors();
    std::size_t i = 0, o = 0;
    std::map<int64_t, int64_t> out_uid;
    for (const Tensor& t : ops) {
      if (t.producer() < 0)
        in[t.uid()] = values.at(seg.inputs[i++]);
      else
        out_uid[t.uid()] = seg.outputs[o++];
    }
    for (const auto& [uid, arr] : test::reference(seg.graph, in)) values[out_uid.at(uid)] = arr;
  }
  const int64_t y = g.operand_tensors().back().uid();
  test::expect_all_near(values.at(y).to_vector<double>(), whole.at(y).to_vector<double>(), 1e-12);
}

TEST(GraphSegments, APointwiseRunIsCutAtNewDimsAndAtTheFusedEnginesInputLimit) {
  op::Graph g("long");
  Tensor x = g.tensor({"x0", {4}, DType::f32});
  for (int i = 1; i <= 9; ++i)  // nine adds reading ten inputs: eight fit in one run
    x = g.pointwise("add", x, g.tensor({"x" + std::to_string(i), {4}, DType::f32}));
  const Tensor wide = g.tensor({"wide", {2, 4}, DType::f32});
  g.pointwise("mul", x, wide).set_output(true);  // new dims: a new run
  const std::vector<engines::detail::Segment> segs = engines::detail::segments(g);
  ASSERT_EQ(segs.size(), 3u);
  EXPECT_EQ(segs[0].graph.nodes().size(), 7u);
  EXPECT_EQ(segs[0].inputs.size(), 8u);
  EXPECT_EQ(segs[1].graph.nodes().size(), 2u);
  EXPECT_EQ(segs[2].graph.nodes().size(), 1u);
}

}  // namespace
}  // namespace eagle
