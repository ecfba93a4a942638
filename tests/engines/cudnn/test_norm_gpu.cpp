// cuDNN's layernorm / rmsnorm forward on a GPU (skips without one or without cuDNN) against
// the reference engine (float64) on fresh random inputs, outputs poisoned; tolerances
// test::tolerance of each output's dtype (METHOD.md): y in the io dtype, statistics f32.
#include <gtest/gtest.h>

#include "gpu_runs.hpp"

namespace eagle {
namespace {

using test::cudnn::Arrays;
using test::cudnn::CudnnGpu;

TEST_F(CudnnGpu, NormsMatchTheReference) {
  for (const char* op : {"layer_norm", "rms_norm"})
    for (DType d : {DType::f32, DType::f16, DType::bf16})
      for (bool training : {false, true}) {
        SCOPED_TRACE(std::string(op) + " " + std::string(dtype_name(d)) +
                     (training ? " training" : ""));
        op::Graph g(op);
        op::Ports p = {{"x", g.tensor({"x", {7, 33, 1000}, d})},
                       {"scale", g.tensor({"scale", {1000}, d})},
                       {"bias", g.tensor({"bias", {1000}, d})}};
        for (auto& [port, t] : g.op(op, p, {{"training", training}})) t.set_output(true);
        Arrays in;
        for (const op::Tensor& t : g.tensors())
          if (t.producer() < 0)
            in[t.uid()] = test::random_array(t.dims(), t.dtype(), Device::cpu());
        const plan::ExecutionPlans plans = test::cudnn::cudnn_plans(g);
        const Arrays got = test::cudnn::execute(plans, in, test::cudnn::kGpu);
        const Arrays want = test::cudnn::reference(g, in);
        for (const op::Tensor& t : test::cudnn::outputs(g)) {
          SCOPED_TRACE(t.name());
          // f32 statistics and f32 y come from f32 sums over 1000 terms: 1e-5, not 1e-6.
          const double tol = t.dtype() == DType::f32 ? 1e-5 : test::tolerance(t.dtype());
          EXPECT_CLOSE(test::values(got.at(t.uid())), test::values(want.at(t.uid())), tol);
        }
      }
}

}  // namespace
}  // namespace eagle
