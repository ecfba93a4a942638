// The cuDNN backend on a GPU (skips without one or without cuDNN): sdpa and sdpa_bwd, dense and
// THD, against the reference engine (float64) on fresh random inputs with outputs poisoned and
// ragged padding rows NaN; the plan list it makes (entries tagged by mode, in the hook's order,
// no duplicates), a config replayed by (engine id, knobs), and a recorded eagle graph holding a
// cuDNN child graph that bind() patches without a rebuild.
//
// Tolerances (METHOD.md): the relative error of the method per io dtype, test::tolerance (f16
// 2e-3, bf16 1e-2) for the forward's o; twice that for the backward, which rounds P and dS to the
// io dtype before its products (two roundings where the forward has one); 1e-4 for the f32
// statistics (f32 exp/log of cuDNN's softmax against float64).
#include <gtest/gtest.h>

#ifdef EAGLE_HAVE_CUDA
#include <cuda_runtime.h>
#endif

#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "eagle/engines/cudnn.hpp"
#include "engines/cudnn/loader.hpp"
#include "gpu_runs.hpp"
#include "sdpa_check.hpp"
#include "sdpa_graphs.hpp"
#include "test_util.hpp"

namespace eagle {
namespace {

using test::cudnn::Arrays;
using test::cudnn::cudnn_plans;
using test::cudnn::CudnnGpu;
using test::cudnn::execute;
using test::cudnn::kGpu;
using test::cudnn::outputs;
using test::cudnn::reference;
using test::sdpa::compare;
using test::sdpa::Layout;
using test::sdpa::random_inputs;
using test::sdpa::SdpaShape;
using test::sdpa::shape_for;
using test::sdpa::thd;

struct Case {
  const char* name;
  SdpaShape shape;
  Layout layout;
};

std::vector<Case> forward_cases(DType d) {
  std::vector<Case> cases;
  auto dense = [&](const char* name, int64_t b, int64_t sq, int64_t skv, int64_t h, int64_t hk,
                   int64_t dim, bool causal, bool stats) {
    SdpaShape s;
    s.dtype = d, s.batch = b, s.s_q = sq, s.s_kv = skv, s.heads = h, s.kv_heads = hk;
    s.head_dim = s.value_dim = dim;
    s.causal = causal, s.stats = stats;
    cases.push_back({name, s, {}});
  };
  dense("dense odd", 3, 37, 53, 4, 4, 64, false, true);
  dense("dense odd causal", 3, 37, 53, 4, 4, 64, true, true);
  dense("dense gqa causal no stats", 2, 64, 64, 8, 2, 128, true, false);
  dense("dense decode s_q 1", 4, 1, 77, 4, 1, 64, false, true);
  dense("dense s_q > s_kv", 2, 40, 24, 4, 2, 64, false, true);
  auto ragged = [&](const char* name, std::vector<int64_t> lq, std::vector<int64_t> lkv, int64_t h,
                    int64_t hk, bool causal, bool stats) {
    SdpaShape s;
    s.dtype = d, s.heads = h, s.kv_heads = hk, s.head_dim = s.value_dim = 64;
    s.causal = causal, s.stats = stats;
    const Layout l = thd(lq, lkv, 5);
    cases.push_back({name, shape_for(s, l), l});
  };
  ragged("thd lengths 0 and 1", {7, 0, 1, 33, 12}, {9, 0, 1, 40, 12}, 4, 4, false, true);
  ragged("thd causal gqa", {7, 0, 1, 33, 12}, {9, 0, 1, 40, 12}, 8, 2, true, true);
  ragged("thd kv shorter, not causal", {20, 3}, {6, 3}, 4, 2, false, true);
  // FlashAttention's max_seqlen: cuDNN's S is the bound, not the rows (met exactly, then a
  // bucket above the longest sequence, as a seqlen_bucket switch arm has it).
  for (const auto& [name, mq, mkv] : {std::tuple{"thd max_seqlen the longest", 33, 40},
                                      std::tuple{"thd max_seqlen a bucket", 64, 64}}) {
    SdpaShape s;
    s.dtype = d, s.heads = 8, s.kv_heads = 2, s.head_dim = s.value_dim = 64;
    s.causal = true;
    s.max_seqlen_q = mq, s.max_seqlen_kv = mkv;
    const Layout l = thd({7, 0, 1, 33, 12}, {9, 0, 1, 40, 12}, 5);
    cases.push_back({name, shape_for(s, l), l});
  }
  {  // self-attention: one cu_seqlens on both ports (the backward then zeroes no kv rows)
    SdpaShape s;
    s.dtype = d, s.heads = 4, s.kv_heads = 2, s.head_dim = s.value_dim = 64;
    s.causal = true, s.one_cu = true;
    const Layout l = thd({7, 0, 1, 33, 12}, {7, 0, 1, 33, 12}, 5);
    cases.push_back({"thd self-attention, one cu_seqlens", shape_for(s, l), l});
  }
  {
    const std::vector<int64_t> cu_q = test::random_cu_seqlens(6, 50), cu_kv = [&] {
      std::vector<int64_t> c = {0};
      for (std::size_t b = 1; b < cu_q.size(); ++b)  // kv at least as long: causal sees a key
        c.push_back(c.back() + cu_q[b] - cu_q[b - 1] + test::random_ints(1, 0, 20)[0]);
      return c;
    }();
    std::vector<int64_t> lq, lkv;
    for (std::size_t b = 1; b < cu_q.size(); ++b) {
      lq.push_back(cu_q[b] - cu_q[b - 1]);
      lkv.push_back(cu_kv[b] - cu_kv[b - 1]);
    }
    ragged("thd random causal", lq, lkv, 4, 1, true, true);
  }
  return cases;
}

TEST_F(CudnnGpu, ForwardMatchesTheReference) {
  for (DType d : {DType::f16, DType::bf16})
    for (const Case& c : forward_cases(d)) {
      SCOPED_TRACE(std::string(c.name) + " " + std::string(dtype_name(d)));
      const op::Graph g = test::sdpa::sdpa_graph(c.shape);
      const Arrays in = random_inputs(g, c.layout);
      const plan::ExecutionPlans plans = cudnn_plans(g);
      compare(g, c.layout, execute(plans, in, kGpu), reference(g, in), 1.0);
    }
}

TEST_F(CudnnGpu, BackwardMatchesTheReference) {
  for (DType d : {DType::f16, DType::bf16})
    for (const Case& c : forward_cases(d)) {
      if (!c.shape.stats) continue;
      SCOPED_TRACE(std::string(c.name) + " " + std::string(dtype_name(d)));
      // o and stats from the reference forward of the same inputs, as a training step has them.
      const op::Graph fwd = test::sdpa::sdpa_graph(c.shape);
      const Arrays fin = random_inputs(fwd, c.layout);
      const Arrays fout = reference(fwd, fin);
      const op::Graph g = test::sdpa::sdpa_bwd_graph(c.shape);
      const Arrays in = test::sdpa::backward_inputs(fwd, fin, fout, g, c.layout);
      const plan::ExecutionPlans plans = cudnn_plans(g);
      compare(g, c.layout, execute(plans, in, kGpu), reference(g, in), 2.0);
    }
}

// Bottom-right causal with a sequence whose q is longer than its kv: its first rows see no key.
// eagle's definition (the reference): o = 0 and stats = -inf there. Kept apart so a difference
// in cuDNN's convention for such rows shows by name.
TEST_F(CudnnGpu, CausalRowsThatSeeNoKeyGiveZeroAndMinusInfinity) {
  SdpaShape s;
  s.causal = true;
  const Layout l = thd({10, 4}, {6, 4}, 2);  // sequence 0: q rows 0..3 see no key
  const op::Graph g = test::sdpa::sdpa_graph(shape_for(s, l));
  const Arrays in = random_inputs(g, l);
  const plan::ExecutionPlans plans = cudnn_plans(g);
  test::sdpa::expect_rows_see_no_key(g, execute(plans, in, kGpu), s, 4);
}

TEST_F(CudnnGpu, PlanListIsTaggedByModeInTheHooksOrderWithoutDuplicates) {
  SdpaShape s;
  s.s_q = s.s_kv = 128;
  const plan::ExecutionPlans plans = engines::create_execution_plans(
      test::sdpa::sdpa_graph(s), kGpu, {plan::HeurMode::A, plan::HeurMode::FALLBACK});
  ASSERT_GE(plans.count(), 2) << plans.describe();
  int last_mode = -1;
  bool delegate_seen = false;
  std::set<std::pair<int64_t, plan::Knobs>> seen;
  for (int i = 0; i < plans.count(); ++i) {
    const plan::PlanConfig& p = plans.at(i);
    ASSERT_LT(p.engine_id, plan::kBackendIdEnd) << "no engine of ours runs sdpa on a GPU";
    EXPECT_TRUE(seen.insert({p.engine_id, p.knobs}).second) << "listed twice: " << p.name;
    if (p.engine_id == plan::kBackendHeuristicEngineId) {
      EXPECT_FALSE(p.mode.has_value());
      delegate_seen = true;
      continue;
    }
    EXPECT_FALSE(delegate_seen) << "the delegating entry follows the moded entries";
    ASSERT_TRUE(p.mode.has_value()) << p.name;
    EXPECT_GE(static_cast<int>(*p.mode), last_mode) << "mode A's block comes first";
    last_mode = static_cast<int>(*p.mode);
  }
  EXPECT_TRUE(delegate_seen) << plans.describe();
  EXPECT_EQ(plans.at(0).mode, plan::HeurMode::A);
}

TEST_F(CudnnGpu, AConfigReplaysByEngineIdAndKnobs) {
  SdpaShape s;
  s.s_q = 33, s.s_kv = 65;
  const op::Graph g = test::sdpa::sdpa_graph(s);
  const plan::ExecutionPlans listed = cudnn_plans(g);
  const plan::PlanConfig& chosen = listed.at(listed.selected());
  plan::ExecutionPlans replay =
      engines::create_execution_plan(g.clone(), kGpu, chosen.engine_id, chosen.knobs);
  ASSERT_EQ(replay.count(), 1);
  EXPECT_EQ(replay.build_plans(), 0);
  const Arrays in = random_inputs(g, {});
  compare(g, {}, execute(replay, in, kGpu), reference(g, in), 1.0);
}

TEST_F(CudnnGpu, TheDelegatingEntryLetsCudnnPick) {
  SdpaShape s;
  const op::Graph g = test::sdpa::sdpa_graph(s);
  plan::ExecutionPlans plans = engines::create_execution_plans(g.clone(), kGpu);
  int delegate = -1;
  for (int i = 0; i < plans.count(); ++i)
    if (plans.at(i).engine_id == plan::kBackendHeuristicEngineId) delegate = i;
  ASSERT_GE(delegate, 0) << plans.describe();
  plans.select_plan(delegate);
  EXPECT_EQ(plans.build_plans(), delegate);
  const Arrays in = random_inputs(g, {});
  compare(g, {}, execute(plans, in, kGpu), reference(g, in), 1.0);
}

#ifdef EAGLE_HAVE_CUDA
// The plan's own CUDA graph hooks, called as an executor does: populate an empty graph,
// instantiate and launch it; then new operand addresses, update_cuda_graph, cudaGraphExecUpdate
// and launch again. Both launches match the reference of their inputs.
void populates_and_updates(const SdpaShape& shape, const Layout& l) {
  const op::Graph g = test::sdpa::sdpa_graph(shape);
  const plan::ExecutionPlans plans = cudnn_plans(g);
  const std::shared_ptr<const plan::CompiledPlan> compiled = plans.compiled();
  const Stream stream(kGpu);
  const Library* lib = compiled->library();
  ASSERT_NE(lib, nullptr);
  void* handle = lib->create(kGpu, stream.native());
  const std::size_t ws_bytes = compiled->workspace_bytes();
  const Array ws =
      ws_bytes ? Array::empty({static_cast<int64_t>(ws_bytes)}, DType::u8, kGpu) : Array();
  plan::ExecutionContext ctx{stream.native(), handle, ws_bytes ? ws.data() : nullptr, ws_bytes};
  ctx.device = kGpu;
  // Operands on the device: the inputs of `in`, outputs poisoned.
  struct Bound {
    plan::VariantPack pack;
    std::vector<Array> keep;
    Arrays out;
  };
  auto bind = [&](const Arrays& in) {
    Bound b{plan::VariantPack(plans.layout()), {}, {}};
    for (const auto& [uid, a] : in) {
      b.keep.push_back(a.to(kGpu));
      b.pack.set(uid, plan::Operand(b.keep.back()));
    }
    for (const op::Tensor& t : outputs(g)) {
      b.out[t.uid()] = test::poisoned(t.dims(), t.dtype(), kGpu);
      b.pack.set(t.uid(), plan::Operand(b.out[t.uid()]));
    }
    return b;
  };
  auto host = [](const Arrays& a) {
    Arrays h;
    for (const auto& [uid, x] : a) h[uid] = x.to(Device::cpu());
    return h;
  };
  const Arrays in0 = random_inputs(g, l), in1 = random_inputs(g, l);
  Bound b0 = bind(in0);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaGraphCreate(&graph, 0), cudaSuccess);
  ASSERT_TRUE(compiled->populate_cuda_graph(b0.pack.data(), ctx, graph));
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  auto launch = [&] {
    ASSERT_EQ(cudaGraphLaunch(exec, static_cast<cudaStream_t>(stream.native())), cudaSuccess);
    stream.synchronize();
  };
  launch();
  compare(g, l, host(b0.out), reference(g, in0), 1.0);
  Bound b1 = bind(in1);
  ASSERT_TRUE(compiled->update_cuda_graph(b1.pack.data(), ctx, graph));
  cudaGraphExecUpdateResultInfo info{};
  ASSERT_EQ(cudaGraphExecUpdate(exec, graph, &info), cudaSuccess);
  launch();
  compare(g, l, host(b1.out), reference(g, in1), 1.0);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  lib->destroy(handle);
}

TEST_F(CudnnGpu, DensePlanPopulatesAndUpdatesItsCudaGraph) {
  SdpaShape s;
  s.s_q = 40, s.s_kv = 72, s.causal = true;
  populates_and_updates(s, {});
}

TEST_F(CudnnGpu, ThdPlanPopulatesAndUpdatesItsCudaGraph) {
  SdpaShape s;
  const Layout l = thd({5, 0, 17, 1}, {9, 0, 17, 3}, 4);
  populates_and_updates(shape_for(s, l), l);
}
#endif

// A recorded eagle graph calling the planned op: the cuDNN plan enters as a child graph it
// populates itself (dense: cuDNN's nodes; THD: the sequence-length kernel, then cuDNN's), and
// bind() updates it in place.
void recorded_graph_binds(const SdpaShape& shape, const Layout& l) {
  SdpaShape s = shape;
  s.stats = false;  // one output
  const op::Graph og = test::sdpa::sdpa_graph(s);
  const Kernel k = engines::planned_kernel(og, {plan::HeurMode::A, plan::HeurMode::FALLBACK});
  const Arrays in0 = random_inputs(og, l), in1 = random_inputs(og, l);
  std::vector<std::pair<std::string, int64_t>> params;  // read operands in uid order
  for (const op::Tensor& t : og.operand_tensors())
    if (t.producer() < 0) params.emplace_back(t.name(), t.uid());
  Graph g = Graph::record([&](Recorder& r) {
    std::vector<Arg> args;
    for (const auto& [name, uid] : params) args.push_back(r.param(name, in0.at(uid).to(kGpu)));
    r.result(r.call(k, args));
  });
  std::vector<std::string> warnings;
  g.set_warning_handler([&](const std::string& w) { warnings.push_back(w); });
  g.build(kGpu);
  EXPECT_NE(g.schedule().find("1 child graphs"), std::string::npos) << g.schedule();
  const int64_t o_uid = og.nodes()[0].output("o").uid();
  auto check = [&](const Arrays& in) {
    const Arrays got = {{o_uid, g()[0].to(Device::cpu())}};
    compare(og, l, got, reference(og, in), 1.0);
  };
  check(in0);
  for (const auto& [name, uid] : params)
    if (name == "q" || name == "v") g.bind(name, in1.at(uid).to(kGpu));
  Arrays mixed = in0;
  for (const auto& [name, uid] : params)
    if (name == "q" || name == "v") mixed[uid] = in1.at(uid);
  check(mixed);
  EXPECT_EQ(g.rebuild_count(), 0) << (warnings.empty() ? "" : warnings[0]);
  EXPECT_TRUE(warnings.empty());
}

TEST_F(CudnnGpu, RecordedDenseGraphHoldsACudnnChildGraphThatBindPatches) {
  SdpaShape s;
  s.s_q = 40, s.s_kv = 72, s.causal = true;
  recorded_graph_binds(s, {});
}

TEST_F(CudnnGpu, RecordedThdGraphHoldsItsKernelAndCudnnsGraphAndBindPatches) {
  SdpaShape s;
  s.causal = true;
  const Layout l = thd({5, 0, 17, 1}, {9, 0, 17, 3}, 4);
  recorded_graph_binds(shape_for(s, l), l);
}

}  // namespace
}  // namespace eagle
