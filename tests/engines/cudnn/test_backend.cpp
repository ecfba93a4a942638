// The cuDNN backend as a participant of planning (src/engines/cudnn/backend.cpp and what it
// calls): with cuDNN hidden the plan list holds no backend entries and planning still succeeds;
// the status string and the decline reasons say why; cuDNN's own validation of the lowered
// graph, which needs cuDNN but no GPU; knob names.
#include <gtest/gtest.h>

#include <string>

#include "eagle/engines/cudnn.hpp"
#include "engines/cudnn/frontend.hpp"
#include "engines/cudnn/knobs.hpp"
#include "engines/cudnn/loader.hpp"
#include "sdpa_graphs.hpp"
#include "test_util.hpp"

namespace eagle {
namespace {

using test::sdpa::SdpaShape;

// A build without CUDA has no cuDNN backend to test (its status says so, below).
#ifdef EAGLE_HAVE_CUDA
#define EAGLE_SKIP_WITHOUT_CUDA_BUILD()
#else
#define EAGLE_SKIP_WITHOUT_CUDA_BUILD() GTEST_SKIP() << "this build has no CUDA"
#endif

bool has_backend_entry(const plan::ExecutionPlans& plans) {
  for (int i = 0; i < plans.count(); ++i)
    if (plans.at(i).engine_id < plan::kBackendIdEnd) return true;
  return false;
}

TEST(CudnnBackend, HiddenCudnnOffersNothingAndPlanningStillSucceeds) {
  EAGLE_SKIP_WITHOUT_CUDA_BUILD();
  test::EnvGuard env("EAGLE_CUDNN_LIBRARY");
  env.set("/nonexistent/libcudnn.so.9");
  const std::string status = engines::cudnn_backend_status();
  EXPECT_NE(status.find("/nonexistent"), std::string::npos) << status;
  EXPECT_EQ(status.find("loaded from"), std::string::npos) << status;
  SdpaShape s;
  // For a GPU (a stand-in descriptor: nothing is queried): no backend entry, no delegate.
  const op::Graph gpu_graph = test::sdpa::sdpa_graph(s);
  const plan::ExecutionPlans gpu =
      plan::ExecutionPlans::create(gpu_graph, engines::builtin_manifest(), test::stand_in_gpu(90),
                                   {plan::HeurMode::A, plan::HeurMode::FALLBACK});
  EXPECT_FALSE(has_backend_entry(gpu)) << gpu.describe();
  const std::string why = engines::cudnn_decline_reason(gpu.graph());
  EXPECT_NE(why.find("/nonexistent"), std::string::npos) << why;
  EXPECT_NE(why.find("mode A"), std::string::npos) << why;
  EXPECT_NE(why.find("mode FALLBACK"), std::string::npos) << why;
  // On the CPU the reference plans, builds and is the whole list.
  plan::ExecutionPlans cpu =
      engines::create_execution_plans(test::sdpa::sdpa_graph(s), Device::cpu());
  EXPECT_FALSE(has_backend_entry(cpu)) << cpu.describe();
  ASSERT_GE(cpu.count(), 1);
  EXPECT_EQ(cpu.build_plans(), 0);
  EXPECT_EQ(cpu.name_at(0), "reference");
}

TEST(CudnnBackend, StatusSaysWhereCudnnCameFrom) {
  const std::string status = engines::cudnn_backend_status();
  EXPECT_FALSE(status.empty());
  std::cout << "cudnn backend: " << status << "\n";
#ifndef EAGLE_HAVE_CUDA
  EXPECT_NE(status.find("no CUDA"), std::string::npos) << status;
  return;
#endif
  if (cudnn::cudnn_library().loaded) {
    EXPECT_EQ(status.rfind("cuDNN 9.", 0), 0u) << status;
    EXPECT_NE(status.find("loaded from"), std::string::npos) << status;
  }
}

TEST(CudnnBackend, NonAttentionGraphsGetNoEntriesAndSayWhy) {
  op::Graph g("exp");
  g.pointwise("exp", g.tensor({"x", {4}, DType::f32})).set_output(true);
  const plan::ExecutionPlans plans =
      engines::create_execution_plans(g, Device::cpu(), {plan::HeurMode::A});
  EXPECT_FALSE(has_backend_entry(plans));
  EXPECT_NE(engines::cudnn_decline_reason(plans.graph()).find("no lowering for op exp"),
            std::string::npos);
}

TEST(CudnnBackend, WithoutAGpuEntriesAreEmptyAndTheReasonIsRecorded) {
  EAGLE_SKIP_WITHOUT_CUDA_BUILD();
  if (cuda_available()) GTEST_SKIP() << "a GPU is attached: the GPU tests cover entries";
  if (!cudnn::cudnn_library().loaded) GTEST_SKIP() << engines::cudnn_backend_status();
  const plan::ExecutionPlans plans = plan::ExecutionPlans::create(
      test::sdpa::sdpa_graph(SdpaShape{}), engines::builtin_manifest(), test::stand_in_gpu(90));
  EXPECT_FALSE(has_backend_entry(plans)) << plans.describe();
  const std::string why = engines::cudnn_decline_reason(plans.graph());
  EXPECT_NE(why.find("no cuDNN handle on cuda:0"), std::string::npos) << why;
}

// cudnn-frontend validates the lowered graph for an sm without touching a GPU: the tensors,
// uids and attributes eagle pushes are ones cuDNN 9 takes (or declines with its own reason).
class CudnnValidation : public ::testing::Test {
 protected:
  void SetUp() override {
    EAGLE_SKIP_WITHOUT_CUDA_BUILD();
    if (!cudnn::cudnn_library().loaded) GTEST_SKIP() << engines::cudnn_backend_status();
  }
  static void validates(const op::Graph& g) {
    const cudnn::Lowered L = cudnn::lower(g);
    try {
      cudnn::validate(L, test::stand_in_gpu(90));
    } catch (const NotSupported& e) {
      ADD_FAILURE() << L.summary() << ": " << e.what();
    }
  }
};

TEST_F(CudnnValidation, DenseAndRaggedForwardAndBackwardValidate) {
  for (bool ragged : {false, true})
    for (bool causal : {false, true})
      for (DType d : {DType::f16, DType::bf16}) {
        SdpaShape s;
        s.ragged = ragged;
        s.causal = causal;
        s.dtype = d;
        s.batch = 3, s.s_q = 40, s.s_kv = 56, s.heads = 8, s.kv_heads = 2, s.head_dim = 64,
        s.value_dim = 64;
        SCOPED_TRACE(std::string(ragged ? "THD" : "dense") + (causal ? " causal " : " ") +
                     std::string(dtype_name(d)));
        validates(test::sdpa::sdpa_graph(s));
        s.stats = false;
        validates(test::sdpa::sdpa_graph(s));
        validates(test::sdpa::sdpa_bwd_graph(s));
      }
}

TEST_F(CudnnValidation, TheGpuTestShapesValidate) {
  struct Dense {
    int64_t b, sq, skv, h, hk, d;
    bool causal;
  };
  for (const Dense& c : {Dense{3, 37, 53, 4, 4, 64, false}, Dense{3, 37, 53, 4, 4, 64, true},
                         Dense{2, 64, 64, 8, 2, 128, true}, Dense{4, 1, 77, 4, 1, 64, false},
                         Dense{2, 40, 24, 4, 2, 64, false}}) {
    SdpaShape s;
    s.batch = c.b, s.s_q = c.sq, s.s_kv = c.skv, s.heads = c.h, s.kv_heads = c.hk;
    s.head_dim = s.value_dim = c.d;
    s.causal = c.causal;
    SCOPED_TRACE("dense S " + std::to_string(c.sq) + "/" + std::to_string(c.skv));
    validates(test::sdpa::sdpa_graph(s));
    validates(test::sdpa::sdpa_bwd_graph(s));
  }
}

TEST_F(CudnnValidation, MatmulWithBiasAndEpiloguesValidates) {
  for (const char* act : {"relu", "gelu", "gelu_tanh", "tanh", "sigmoid"}) {
    SCOPED_TRACE(act);
    op::Graph g("mm");
    const op::Tensor c =
        g.matmul(g.tensor({"a", {2, 64, 128}, DType::bf16}),
                 g.tensor({"b", {128, 96}, DType::bf16}), g.tensor({"bias", {96}, DType::bf16}));
    g.pointwise(act, c).set_output(true);
    validates(g);
  }
}

TEST_F(CudnnValidation, NormsValidate) {
  for (const char* op : {"layer_norm", "rms_norm"})
    for (DType d : {DType::f32, DType::f16, DType::bf16})
      for (bool training : {false, true}) {
        SCOPED_TRACE(std::string(op) + " " + std::string(dtype_name(d)) +
                     (training ? " training" : ""));
        op::Graph g(op);
        op::Ports p = {{"x", g.tensor({"x", {33, 256}, d})},
                       {"scale", g.tensor({"scale", {256}, d})},
                       {"bias", g.tensor({"bias", {256}, d})}};
        for (auto& [port, t] : g.op(op, p, {{"training", training}})) t.set_output(true);
        validates(g);
      }
}

TEST_F(CudnnValidation, CudnnsOwnDeclineIsNotSupportedWithItsReason) {
  SdpaShape s;
  s.head_dim = 12;  // cuDNN's fused attention wants head dims in multiples of 8
  s.value_dim = 12;
  const cudnn::Lowered L = cudnn::lower(test::sdpa::sdpa_graph(s));
  test::expect_throw_with<NotSupported>([&] { cudnn::validate(L, test::stand_in_gpu(90)); },
                                        {"cudnn", "does not take", "multiple of 8"});
}

TEST(CudnnKnobs, NamesRoundTrip) {
  EXPECT_EQ(cudnn::knob_name(2), "tile_size");
  EXPECT_EQ(cudnn::knob_name(7), "stages");
  EXPECT_EQ(cudnn::knob_name(32), "tile_cga");
  EXPECT_EQ(cudnn::knob_name(0), "");
  EXPECT_EQ(cudnn::knob_name(1000), "");  // frontend-only knobs are not backend knobs
  for (int64_t t = 1; t <= 32; ++t) EXPECT_EQ(cudnn::knob_type(cudnn::knob_name(t)), t);
  EXPECT_EQ(cudnn::knob_type("no_such_knob"), -1);
}

}  // namespace
}  // namespace eagle
