// Cutting an op::Graph into segments one engine family serves (src/engines/graph_segments.cpp):
// runs of pointwise nodes together, a matmul with its epilogue chain, every other node alone,
// tensors crossing segments become outputs and inputs, and running the segments in order
// computes what the whole graph does.
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
  // matmul and gelu, its epilogue (add reads the matmul's result again: not a chain)
  EXPECT_EQ(segs[0].graph.nodes().size(), 2u);
  EXPECT_TRUE(segs[0].epilogue);
  EXPECT_EQ(segs[1].graph.nodes().size(), 1u);  // add
  EXPECT_EQ(segs[2].graph.nodes().size(), 1u);  // softmax
  EXPECT_EQ(segs[3].graph.nodes().size(), 1u);  // mul
  EXPECT_EQ(segs[0].outputs.size(), 2u);        // the matmul's result and gelu's, both read by add
  EXPECT_EQ(segs[0].outputs[0], c.uid());
  EXPECT_EQ(segs[1].outputs, std::vector<int64_t>{d.uid()});

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

// What joins a matmul as its epilogue: the pointwise nodes right after it, each reading the
// previous result once and otherwise only tensors from outside (4 at most); the matmul's result
// is an output of the segment even where nothing else reads it (the derivative does).
TEST(GraphSegments, AMatmulTakesItsPointwiseChainAsItsEpilogue) {
  op::Graph g("epilogue");
  const Tensor a = g.tensor({"a", {3, 4}, DType::f64});
  const Tensor b = g.tensor({"b", {4, 2}, DType::f64});
  const Tensor bias = g.tensor({"bias", {3, 2}, DType::f64});
  const Tensor c = g.matmul(a, b);
  Tensor v = g.pointwise("add", c, bias);
  for (const char* op : {"gelu", "tanh", "exp", "neg"}) v = g.pointwise(op, v);  // 5 in all
  g.pointwise("mul", v, v).set_output(true).set_name("y");  // reads the chain's value twice
  std::vector<engines::detail::Segment> segs = engines::detail::segments(g);
  ASSERT_EQ(segs.size(), 2u);
  EXPECT_EQ(segs[0].graph.nodes().size(), 5u);  // matmul, add, gelu, tanh, exp
  EXPECT_TRUE(segs[0].epilogue);
  EXPECT_EQ(segs[0].inputs, (std::vector<int64_t>{a.uid(), b.uid(), bias.uid()}));
  EXPECT_EQ(segs[0].outputs.front(), c.uid());  // virtual in the graph, kept for the derivative
  EXPECT_EQ(segs[0].outputs.size(), 2u);        // and exp's result, which neg reads
  EXPECT_EQ(segs[1].graph.nodes().size(), 2u);  // neg and mul, a pointwise run
  EXPECT_FALSE(segs[1].epilogue);

  // Unfused: the matmul alone, the chain one pointwise run.
  segs = engines::detail::segments(g, /*fuse_epilogues=*/false);
  ASSERT_EQ(segs.size(), 2u);
  EXPECT_EQ(segs[0].graph.nodes().size(), 1u);
  EXPECT_FALSE(segs[0].epilogue);
  EXPECT_EQ(segs[1].graph.nodes().size(), 6u);
}

TEST(GraphSegments, AMatmulWithoutAChainIsAloneAndKeepsOnlyWhatIsRead) {
  op::Graph g("plain");
  const Tensor a = g.tensor({"a", {3, 4}, DType::f32});
  const Tensor b = g.tensor({"b", {4, 2}, DType::f32});
  const Tensor wide = g.tensor({"wide", {2, 3, 2}, DType::f32});
  // A pointwise node of other dims (a broadcast) does not join as an epilogue.
  g.pointwise("mul", g.matmul(a, b), wide).set_output(true);
  const std::vector<engines::detail::Segment> segs = engines::detail::segments(g);
  ASSERT_EQ(segs.size(), 2u);
  EXPECT_EQ(segs[0].graph.nodes().size(), 1u);
  EXPECT_FALSE(segs[0].epilogue);
}

}  // namespace
}  // namespace eagle
