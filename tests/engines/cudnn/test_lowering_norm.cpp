// The norm lowering (src/engines/cudnn/lowering_norm.cpp): x [..., normalized] as cuDNN's
// [N, C, 1, 1], statistics [N, 1, 1, 1] f32 in training, declines named.
#include <gtest/gtest.h>

#include "engines/cudnn/lowering.hpp"
#include "test_util.hpp"

namespace eagle {
namespace {

using cudnn::Lowered;

op::Graph norm_graph(const std::string& op, DType d, bool training, bool bias = true) {
  op::Graph g(op);
  op::Ports p = {{"x", g.tensor({"x", {3, 5, 64}, d})}, {"scale", g.tensor({"scale", {64}, d})}};
  if (bias) p.emplace_back("bias", g.tensor({"bias", {64}, d}));
  for (auto& [port, t] : g.op(op, p, {{"training", training}, {"epsilon", 1e-3}}))
    t.set_output(true);
  return g;
}

TEST(CudnnNormLowering, LayerNormTrainingWritesItsStatistics) {
  const op::Graph g = norm_graph("layer_norm", DType::bf16, true);
  const Lowered L = cudnn::lower(g);
  EXPECT_EQ(L.op, Lowered::Op::layer_norm);
  EXPECT_TRUE(L.stats);
  EXPECT_DOUBLE_EQ(L.epsilon, 1e-3);
  EXPECT_EQ(L.batch, 15);
  EXPECT_EQ(L.find("x")->dims, (std::array<int64_t, 4>{15, 64, 1, 1}));
  EXPECT_EQ(L.find("scale")->dims, (std::array<int64_t, 4>{1, 64, 1, 1}));
  ASSERT_NE(L.find("mean"), nullptr);
  EXPECT_EQ(L.find("inv_variance")->dims, (std::array<int64_t, 4>{15, 1, 1, 1}));
  EXPECT_EQ(L.find("mean")->uid, g.nodes()[0].output("mean").uid());
}

TEST(CudnnNormLowering, RmsNormInferenceHasNoStatistics) {
  const Lowered L = cudnn::lower(norm_graph("rms_norm", DType::f16, false, false));
  EXPECT_EQ(L.op, Lowered::Op::rms_norm);
  EXPECT_FALSE(L.stats);
  EXPECT_EQ(L.find("inv_rms"), nullptr);
  EXPECT_EQ(L.find("bias"), nullptr);
}

TEST(CudnnNormLowering, DeclinesNameTheirReason) {
  test::expect_throw_with<NotSupported>(
      [] { cudnn::lower(norm_graph("layer_norm", DType::f16, true, false)); },
      {"layer_norm without bias"});
  test::expect_throw_with<NotSupported>(
      [] { cudnn::lower(norm_graph("rms_norm", DType::f64, true)); }, {"f32, f16 or bf16"});
}

}  // namespace
}  // namespace eagle
