// A cuBLASLt GEMM inside a recorded eagle graph on cuda:0: the planned matmul (bias and relu
// epilogue) enters the CUDA graph as a child graph the plan populates (cublasLtMatmul captured
// into it, on the executor's handle and workspace), and bind() of a new input populates a fresh
// one in place, with no rebuild. Skips without a GPU or without cuBLASLt.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "dense.hpp"
#include "engine_sweep.hpp"
#include "engines/cublaslt/api.hpp"
#include "oracles/structured.hpp"
#include "test_util.hpp"

namespace eagle::test {
namespace {

// relu(x w + bias), in float64 from the arrays' own values.
Dense linear_relu(const Array& x, const Array& w, const Array& bias) {
  const Dense b = to_dense(bias);
  Dense y = oracle::matmul(to_dense(x), to_dense(w), &b);
  for (double& v : y.data) v = v < 0 ? 0.0 : v;
  return y;
}

TEST(CublasLtInAGraph, RunsAndRunsAgainAfterBind) {
  const int64_t id = sweep::engine_id(engines::builtin_manifest(), "gemm", "cublaslt");
  const std::string why = sweep::unavailable(engines::builtin_manifest(), id);
  if (!why.empty()) GTEST_SKIP() << why;
  if (!cublaslt::process().ok) GTEST_SKIP() << cublaslt::process().status;
  const Device gpu = Device::cuda(0);

  op::Graph og("linear_relu");
  const op::Tensor x = og.tensor({"x", {64, 96}, DType::f32});
  const op::Tensor w = og.tensor({"w", {96, 80}, DType::f32});
  const op::Tensor bias = og.tensor({"bias", {80}, DType::f32});
  og.pointwise("relu", og.matmul(x, w, bias)).set_output(true).set_name("y");
  const Kernel k = engines::planned_kernel(og);

  const Array x0 = random_array({64, 96}, DType::f32, gpu);
  const Array x1 = random_array({64, 96}, DType::f32, gpu);
  const Array w0 = random_array({96, 80}, DType::f32, gpu);
  const Array b0 = random_array({80}, DType::f32, gpu);
  Graph g = Graph::record([&](Recorder& r) {
    r.result(r.call(k, {r.param("x", x0), r.param("w", w0), r.param("bias", b0)}));
  });
  std::vector<std::string> warnings;
  g.set_warning_handler([&](const std::string& w) { warnings.push_back(w); });
  g.build(gpu);
  EXPECT_NE(g.schedule().find("1 child graphs"), std::string::npos) << g.schedule();
  // f32 accumulation over K = 96 (see test_cublaslt_engine.cpp for the rule).
  const double tol = 1e-5;
  EXPECT_CLOSE(values(g()[0]), linear_relu(x0, w0, b0).data, tol);
  g.bind("x", x1);
  EXPECT_CLOSE(values(g()[0]), linear_relu(x1, w0, b0).data, tol);
  EXPECT_CLOSE(values(g()[0]), linear_relu(x1, w0, b0).data, tol);  // replays stay put
  EXPECT_EQ(g.rebuild_count(), 0) << (warnings.empty() ? "" : warnings[0]);
}

}  // namespace
}  // namespace eagle::test
