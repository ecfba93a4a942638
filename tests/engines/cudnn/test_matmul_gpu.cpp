// The cuDNN backend's fused matmul on a GPU (skips without one or without cuDNN): matmul with
// bias and a pointwise epilogue against the reference engine (float64) on fresh random inputs,
// outputs poisoned. Tolerance: test::tolerance of the io dtype (METHOD.md); the reference rounds
// every node's result to the io dtype, cuDNN keeps the chain in f32 and rounds once, which stays
// within one unit of the last place for these chains.
#include <gtest/gtest.h>

#include "gpu_runs.hpp"

namespace eagle {
namespace {

using test::cudnn::Arrays;
using test::cudnn::CudnnGpu;

void matches_reference(const op::Graph& g) {
  Arrays in;
  for (const op::Tensor& t : g.tensors())
    if (t.producer() < 0) in[t.uid()] = test::random_array(t.dims(), t.dtype(), Device::cpu());
  const plan::ExecutionPlans plans = test::cudnn::cudnn_plans(g);
  const Arrays got = test::cudnn::execute(plans, in, test::cudnn::kGpu);
  const Arrays want = test::cudnn::reference(g, in);
  for (const op::Tensor& t : test::cudnn::outputs(g)) {
    SCOPED_TRACE(t.name());
    EXPECT_CLOSE(test::values(got.at(t.uid())), test::values(want.at(t.uid())),
                 test::tolerance(t.dtype()));
  }
}

TEST_F(CudnnGpu, MatmulWithBiasAndAnEpilogueMatchesTheReference) {
  for (DType d : {DType::f16, DType::bf16})
    for (const char* act : {"relu", "gelu", "gelu_tanh", "sigmoid"}) {
      SCOPED_TRACE(std::string(act) + " " + std::string(dtype_name(d)));
      op::Graph g("mm");
      const op::Tensor c = g.matmul(g.tensor({"a", {3, 37, 64}, d}), g.tensor({"b", {64, 40}, d}),
                                    g.tensor({"bias", {40}, d}));
      g.pointwise(act, c).set_output(true);
      matches_reference(g);
    }
}

TEST_F(CudnnGpu, MatmulWithAResidualAndTwoOutputsMatchesTheReference) {
  op::Graph g("mm");
  op::Tensor c =
      g.matmul(g.tensor({"a", {64, 96}, DType::bf16}), g.tensor({"b", {96, 48}, DType::bf16}));
  c.set_output(true);  // the product itself, and the epilogue's result
  g.pointwise("add", g.pointwise("tanh", c), g.tensor({"r", {64, 48}, DType::bf16}))
      .set_output(true);
  matches_reference(g);
}

}  // namespace
}  // namespace eagle
