// The native normalization engine (softmax, log-softmax, layer_norm, rms_norm forward) against
// the reference engine on fresh random inputs, outputs poisoned (GPU; skipped without one), and
// its declines and its place in the plan list (planning for a stand-in Hopper, everywhere).
#include <gtest/gtest.h>

#include "cuda_build.hpp"
#include "native_structured.hpp"

namespace eagle::test::native {
namespace {

int64_t norm_id() {
  return engine("normalization", "native_normalization");
}

op::Graph softmax_graph(const op::Dims& dims, DType dtype, bool log, int64_t axis = -1) {
  op::Graph g("softmax");
  const op::Tensor x = g.tensor({"x", dims, dtype});
  g.op("softmax", {{"x", x}}, {{"axis", axis}, {"log", log}})
      .at("y")
      .set_output(true)
      .set_name("y");
  return g;
}

// layer_norm or rms_norm over the trailing `nd` dims, with scale and bias when asked, training
// statistics received.
op::Graph norm_graph(const std::string& op, const op::Dims& dims, DType dtype, int64_t nd,
                     bool scale, bool bias) {
  op::Graph g(op);
  op::Ports ports = {{"x", g.tensor({"x", dims, dtype})}};
  const op::Dims trailing(dims.end() - nd, dims.end());
  if (scale) ports.emplace_back("scale", g.tensor({"scale", trailing, dtype}));
  if (bias) ports.emplace_back("bias", g.tensor({"bias", trailing, dtype}));
  auto outs = g.op(op, ports, {{"normalized_ndim", nd}, {"training", true}, {"epsilon", 1e-5}});
  for (auto& [port, t] : outs) t.set_output(true).set_name(port);
  return g;
}

sweep::HostInputs random_inputs(const op::Graph& g, double lo, double hi) {
  sweep::HostInputs in;
  for (const op::Tensor& t : g.operand_tensors())
    if (t.producer() < 0)
      in.emplace_back(t, random_array(t.dims(), t.dtype(), Device::cpu(), lo, hi));
  return in;
}

// ---- GPU: against the reference ----

class NativeSoftmax : public NativeGpuCase {};

TEST_P(NativeSoftmax, SoftmaxAndLogSoftmaxMatchTheReference) {
  EAGLE_SKIP_UNLESS_RUNS_HERE(norm_id());
  for (bool log : {false, true}) {
    SCOPED_TRACE(log ? "log_softmax" : "softmax");
    const op::Graph g = softmax_graph(GetParam().dims, GetParam().dtype, log);
    sweep::compare_with_reference(manifest(), norm_id(), {}, g, random_inputs(g, -4, 4));
  }
}

INSTANTIATE_TEST_SUITE_P(native_normalization, NativeSoftmax,
                         ::testing::ValuesIn(dtype_shapes(row_shapes())), dtype_shape_name);

TEST(NativeSoftmaxShapes, ThreeDimsAndAnAxisFollowedBySizeOneDims) {
  EAGLE_SKIP_UNLESS_RUNS_HERE(norm_id());
  for (DType d : float_dtypes()) {
    SCOPED_TRACE(dtype_name(d));
    const op::Graph a = softmax_graph({2, 3, 17}, d, false);
    sweep::compare_with_reference(manifest(), norm_id(), {}, a, random_inputs(a, -4, 4));
    const op::Graph b = softmax_graph({4, 33, 1, 1}, d, true, 1);
    sweep::compare_with_reference(manifest(), norm_id(), {}, b, random_inputs(b, -4, 4));
  }
}

// Few long rows split into chunks (a block each, combined in a second pass): an odd length
// (scalar path, a short last chunk) and a multiple of every vector width.
TEST(NativeSoftmaxShapes, FewLongRowsSplitIntoChunks) {
  EAGLE_SKIP_UNLESS_RUNS_HERE(norm_id());
  for (DType d : float_dtypes())
    for (const op::Dims& dims : {op::Dims{3, 40001}, op::Dims{5, 65544}})
      for (bool log : {false, true}) {
        SCOPED_TRACE(std::string(dtype_name(d)) + " [" + dims_name(dims) + "]" +
                     (log ? " log" : ""));
        const op::Graph g = softmax_graph(dims, d, log);
        sweep::compare_with_reference(manifest(), norm_id(), {}, g, random_inputs(g, -4, 4));
      }
}

class NativeNorm : public NativeGpuCase {};

TEST_P(NativeNorm, LayerNormAndRmsNormMatchTheReference) {
  EAGLE_SKIP_UNLESS_RUNS_HERE(norm_id());
  for (const char* op : {"layer_norm", "rms_norm"})
    for (int affine = 0; affine < 3; ++affine) {  // none, scale, scale and bias
      SCOPED_TRACE(std::string(op) + " affine " + std::to_string(affine));
      const op::Graph g =
          norm_graph(op, GetParam().dims, GetParam().dtype, 1, affine >= 1, affine >= 2);
      // Shifted inputs: the mean is far from zero, so a one-pass variance would cancel.
      sweep::compare_with_reference(manifest(), norm_id(), {}, g, random_inputs(g, 0.5, 3.0));
    }
}

INSTANTIATE_TEST_SUITE_P(native_normalization, NativeNorm,
                         ::testing::ValuesIn(dtype_shapes(row_shapes())), dtype_shape_name);

TEST(NativeNormShapes, SeveralNormalizedDims) {
  EAGLE_SKIP_UNLESS_RUNS_HERE(norm_id());
  for (DType d : float_dtypes()) {
    SCOPED_TRACE(dtype_name(d));
    const op::Graph g = norm_graph("layer_norm", {5, 3, 7, 9}, d, 3, true, true);
    sweep::compare_with_reference(manifest(), norm_id(), {}, g, random_inputs(g, -2, 2));
    const op::Graph r = norm_graph("rms_norm", {2, 64, 64}, d, 2, true, false);
    sweep::compare_with_reference(manifest(), norm_id(), {}, r, random_inputs(r, -2, 2));
  }
}

// Aligned rows of a block, cached (16-byte packs kept as loaded, one row per block, 64
// registers): 4096 (128 threads in 16-bit, 256 in f32), 16384 (512 and 1024 threads) and 32768
// (1024 threads in 16-bit; f32 streams) elements.
TEST(NativeNormShapes, AlignedRowsOfABlockUpToTheWidestCachedBlock) {
  EAGLE_SKIP_UNLESS_RUNS_HERE(norm_id());
  for (DType d : float_dtypes())
    for (const op::Dims& dims : {op::Dims{600, 4096}, op::Dims{300, 16384}, op::Dims{300, 32768}})
      for (const char* op : {"layer_norm", "rms_norm"}) {
        SCOPED_TRACE(std::string(op) + " " + std::string(dtype_name(d)) + " [" + dims_name(dims) +
                     "]");
        const op::Graph g = norm_graph(op, dims, d, 1, true, true);
        sweep::compare_with_reference(manifest(), norm_id(), {}, g, random_inputs(g, 0.5, 3.0));
      }
}

// A recompute that keeps the statistics alone (op::backward reruns a norm for them and leaves
// y virtual): mean and inv_variance or inv_rms are written, y is not computed. Cached rows
// (4096) and streamed ones (an odd length).
TEST(NativeNormShapes, StatisticsAloneWithAVirtualY) {
  EAGLE_SKIP_UNLESS_RUNS_HERE(norm_id());
  for (DType d : float_dtypes())
    for (const op::Dims& dims : {op::Dims{600, 4096}, op::Dims{77, 1001}})
      for (const char* op : {"layer_norm", "rms_norm"}) {
        SCOPED_TRACE(std::string(op) + " " + std::string(dtype_name(d)) + " [" + dims_name(dims) +
                     "]");
        op::Graph g(op);
        const op::Tensor x = g.tensor({"x", dims, d});
        const op::Tensor scale = g.tensor({"scale", {dims.back()}, d});
        auto outs = g.op(op, {{"x", x}, {"scale", scale}},
                         {{"normalized_ndim", int64_t{1}}, {"training", true}, {"epsilon", 1e-5}});
        for (auto& [port, t] : outs)
          if (port != "y") t.set_output(true).set_name(port);
        sweep::compare_with_reference(manifest(), norm_id(), {}, g, random_inputs(g, 0.5, 3.0));
      }
}

TEST(NativeNormalizationDeclines, AVirtualYWithNoStatisticIsRefused) {
  op::Graph g("nothing received");
  const op::Tensor x = g.tensor({"x", {4, 64}, DType::f32});
  g.op("rms_norm", {{"x", x}}, {{"normalized_ndim", int64_t{1}}, {"epsilon", 1e-5}});
  sweep::expect_declines(manifest(), norm_id(), g, hopper(), {"the output 'y' is virtual"});
}

// The comparison itself, on the CPU: the reference engine passes against itself in every dtype
// (the gates admit a result rounded once to the output dtype).
TEST(NativeNormalizationHarness, TheReferencePassesAgainstItself) {
  const int64_t ref = engine("normalization", "reference");
  for (DType d : float_dtypes()) {
    SCOPED_TRACE(dtype_name(d));
    const op::Graph s = softmax_graph({3, 50}, d, false);
    sweep::compare_with_reference(manifest(), ref, {}, s, random_inputs(s, -4, 4));
    const op::Graph n = norm_graph("layer_norm", {3, 7, 5}, d, 2, true, true);
    sweep::compare_with_reference(manifest(), ref, {}, n, random_inputs(n, 0.5, 3));
  }
}

// ---- the backward ops ----

op::Graph softmax_bwd_graph(const op::Dims& dims, DType dtype, bool log) {
  op::Graph g("softmax_bwd");
  const op::Tensor y = g.tensor({"y", dims, dtype}), dy = g.tensor({"dy", dims, dtype});
  g.op("softmax_bwd", {{"y", y}, {"dy", dy}}, {{"log", log}})
      .at("dx")
      .set_output(true)
      .set_name("dx");
  return g;
}

op::Graph norm_bwd_graph(const std::string& op, const op::Dims& dims, DType dtype, int64_t nd,
                         bool scale, bool bias_grad) {
  op::Graph g(op);
  const op::Dims lead(dims.begin(), dims.end() - nd), trail(dims.end() - nd, dims.end());
  op::Ports ports = {{"dy", g.tensor({"dy", dims, dtype})}, {"x", g.tensor({"x", dims, dtype})}};
  if (op == "layer_norm_bwd") {
    ports.emplace_back("mean", g.tensor({"mean", lead, DType::f32}));
    ports.emplace_back("inv_variance", g.tensor({"inv_variance", lead, DType::f32}));
  } else {
    ports.emplace_back("inv_rms", g.tensor({"inv_rms", lead, DType::f32}));
  }
  if (scale) ports.emplace_back("scale", g.tensor({"scale", trail, dtype}));
  auto outs = g.op(op, ports, {{"normalized_ndim", nd}, {"bias_grad", bias_grad}});
  for (auto& [port, t] : outs) t.set_output(true).set_name(port);
  return g;
}

// Inputs in the ranges the forward would hand the backward: statistics with inv_std in
// [0.5, 2], softmax outputs in (0, 1) (log softmax: [-8, -1]).
sweep::HostInputs backward_inputs(const op::Graph& g, bool log = false) {
  sweep::HostInputs in;
  for (const op::Tensor& t : g.operand_tensors()) {
    if (t.producer() >= 0) continue;
    const std::string& n = t.name();
    const auto [lo, hi] = n == "y" ? std::pair{log ? -8.0 : 0.001, log ? -1.0 : 1.0}
                          : n == "inv_variance" || n == "inv_rms" ? std::pair{0.5, 2.0}
                          : n == "mean"                           ? std::pair{-0.5, 0.5}
                                                                  : std::pair{-1.0, 1.0};
    in.emplace_back(t, random_array(t.dims(), t.dtype(), Device::cpu(), lo, hi));
  }
  return in;
}

class NativeSoftmaxBwd : public NativeGpuCase {};

TEST_P(NativeSoftmaxBwd, MatchesTheReference) {
  EAGLE_SKIP_UNLESS_RUNS_HERE(norm_id());
  for (bool log : {false, true}) {
    SCOPED_TRACE(log ? "log_softmax_bwd" : "softmax_bwd");
    const op::Graph g = softmax_bwd_graph(GetParam().dims, GetParam().dtype, log);
    sweep::compare_with_reference(manifest(), norm_id(), {}, g, backward_inputs(g, log));
  }
}

INSTANTIATE_TEST_SUITE_P(native_normalization, NativeSoftmaxBwd,
                         ::testing::ValuesIn(dtype_shapes(row_shapes())), dtype_shape_name);

// Aligned rows of a block (the training shape's path): packs kept as loaded, one row per block,
// log a template parameter; rows of 4096, 16384 and 32768 elements (up to 1024 threads cached;
// f32 32768 streams), enough rows that none split.
TEST(NativeSoftmaxBwdShapes, AlignedRowsOfABlockUpToTheWidestCachedBlock) {
  EAGLE_SKIP_UNLESS_RUNS_HERE(norm_id());
  for (DType d : float_dtypes())
    for (const op::Dims& dims : {op::Dims{600, 4096}, op::Dims{300, 16384}, op::Dims{300, 32768}})
      for (bool log : {false, true}) {
        SCOPED_TRACE(std::string(log ? "log_softmax_bwd " : "softmax_bwd ") +
                     std::string(dtype_name(d)) + " [" + dims_name(dims) + "]");
        const op::Graph g = softmax_bwd_graph(dims, d, log);
        sweep::compare_with_reference(manifest(), norm_id(), {}, g, backward_inputs(g, log));
      }
}

class NativeNormBwd : public NativeGpuCase {};

TEST_P(NativeNormBwd, LayerNormAndRmsNormBackwardMatchTheReference) {
  EAGLE_SKIP_UNLESS_RUNS_HERE(norm_id());
  for (const char* op : {"layer_norm_bwd", "rms_norm_bwd"})
    for (int variant = 0; variant < 3; ++variant) {  // no scale; scale; scale and bias_grad
      SCOPED_TRACE(std::string(op) + " variant " + std::to_string(variant));
      const op::Graph g =
          norm_bwd_graph(op, GetParam().dims, GetParam().dtype, 1, variant >= 1, variant >= 2);
      sweep::compare_with_reference(manifest(), norm_id(), {}, g, backward_inputs(g));
    }
}

INSTANTIATE_TEST_SUITE_P(native_normalization, NativeNormBwd,
                         ::testing::ValuesIn(dtype_shapes(row_shapes())), dtype_shape_name);

TEST(NativeNormBwdShapes, SeveralNormalizedDimsAndBiasGradWithoutScale) {
  EAGLE_SKIP_UNLESS_RUNS_HERE(norm_id());
  for (DType d : float_dtypes()) {
    SCOPED_TRACE(dtype_name(d));
    const op::Graph g = norm_bwd_graph("layer_norm_bwd", {5, 3, 7, 9}, d, 3, true, true);
    sweep::compare_with_reference(manifest(), norm_id(), {}, g, backward_inputs(g));
    const op::Graph r = norm_bwd_graph("rms_norm_bwd", {300, 64}, d, 1, false, true);
    sweep::compare_with_reference(manifest(), norm_id(), {}, r, backward_inputs(r));
  }
}

// Many rows per group: every cached slot of column partials holds several rows and the slot
// sums add hundreds of slots (vectorized, 8 and 4 elements a pack; odd rows a warp each);
// rows too long for a cached group of kNormBwdCachedThreads stream (column chunks).
TEST(NativeNormBwdShapes, ManyRowsAcrossEverySlotAndRowsTooLongToCache) {
  EAGLE_SKIP_UNLESS_RUNS_HERE(norm_id());
  for (DType d : float_dtypes())
    for (const op::Dims& dims :
         {op::Dims{5000, 1024}, op::Dims{3001, 2056}, op::Dims{4001, 517}, op::Dims{600, 8200}})
      for (const char* op : {"layer_norm_bwd", "rms_norm_bwd"}) {
        SCOPED_TRACE(std::string(op) + " " + std::string(dtype_name(d)) + " [" + dims_name(dims) +
                     "]");
        const op::Graph g = norm_bwd_graph(op, dims, d, 1, true, true);
        sweep::compare_with_reference(manifest(), norm_id(), {}, g, backward_inputs(g));
      }
}

// Aligned rows of a block take the staged kernel (cp.async stages, 2 packs a thread): rows of
// 4096 (256 threads in 16-bit, 512 in f32) with several rows per block so the 3 stages wrap;
// rows of 1032 16-bit elements (129 packs: 96 threads, most of them with one pack and some with
// none in a row); fewer rows than blocks; 1024 packs (8192 16-bit: 512 threads, the widest);
// with and without scale and parameter gradients.
TEST(NativeNormBwdShapes, StagedRowsOfABlock) {
  EAGLE_SKIP_UNLESS_RUNS_HERE(norm_id());
  for (DType d : float_dtypes())
    for (const op::Dims& dims :
         {op::Dims{1800, 4096}, op::Dims{1500, 1032}, op::Dims{3, 4096}, op::Dims{300, 8192}})
      for (const char* op : {"layer_norm_bwd", "rms_norm_bwd"})
        for (int variant = 0; variant < 3; ++variant) {  // no scale; scale; scale and bias_grad
          SCOPED_TRACE(std::string(op) + " " + std::string(dtype_name(d)) + " [" + dims_name(dims) +
                       "] variant " + std::to_string(variant));
          const op::Graph g = norm_bwd_graph(op, dims, d, 1, variant >= 1, variant >= 2);
          sweep::compare_with_reference(manifest(), norm_id(), {}, g, backward_inputs(g));
        }
}

TEST(NativeNormalizationHarness, TheReferencePassesAgainstItselfBackward) {
  const int64_t ref = engine("normalization", "reference");
  const op::Graph s = softmax_bwd_graph({3, 50}, DType::bf16, true);
  sweep::compare_with_reference(manifest(), ref, {}, s, backward_inputs(s, true));
  const op::Graph n = norm_bwd_graph("layer_norm_bwd", {6, 10}, DType::f16, 1, true, true);
  sweep::compare_with_reference(manifest(), ref, {}, n, backward_inputs(n));
}

TEST(NativeNormalizationPlanning, BackwardPlansAskForWorkspaceOnlyForParameterGradients) {
  EAGLE_SKIP_WITHOUT_CUDA_BUILD();
  plan::ExecutionPlans with = plan::ExecutionPlans::create(
      norm_bwd_graph("rms_norm_bwd", {16384, 4096}, DType::bf16, 1, true, false), manifest(),
      hopper());
  EXPECT_EQ(with.at(0).engine_id, norm_id()) << with.describe();
  EXPECT_EQ(with.build_plans(), 0);
  // Rows of 512 packs, staged: a block of 256 threads each (2 packs a thread), whose 3 stages of
  // dy and x (48 KB + 1 KB of scratch) let at most 4 blocks share an SM's 228 KB, of the 132: a
  // float slot of dscale and one of dbias per block.
  EXPECT_EQ(with.workspace_size(), 2u * 4096 * 132 * 4 * 4);
  plan::ExecutionPlans without = plan::ExecutionPlans::create(
      norm_bwd_graph("rms_norm_bwd", {16384, 4096}, DType::bf16, 1, false, false), manifest(),
      hopper());
  EXPECT_EQ(without.build_plans(), 0);
  EXPECT_EQ(without.workspace_size(), 0u);
}

TEST(NativeNormalizationDeclines, StatisticsThatAreNotF32) {
  op::Graph g("stats");
  const op::Tensor dy = g.tensor({"dy", {4, 8}, DType::bf16}),
                   x = g.tensor({"x", {4, 8}, DType::bf16});
  const op::Tensor inv = g.tensor({"inv_rms", {4}, DType::bf16});
  g.op("rms_norm_bwd", {{"dy", dy}, {"x", x}, {"inv_rms", inv}}).at("dx").set_output(true);
  sweep::expect_declines(manifest(), norm_id(), g, hopper(), {"inv_rms must be f32"});
}

// ---- planning (everywhere) ----

TEST(NativeNormalizationPlanning, TheNativeEngineLeadsOnAGpu) {
  for (const op::Graph& g : {softmax_graph({8, 32}, DType::bf16, false),
                             norm_graph("rms_norm", {8, 32}, DType::f16, 1, true, false)}) {
    const plan::ExecutionPlans plans =
        plan::ExecutionPlans::create(g.clone(), manifest(), hopper());
    ASSERT_GE(plans.count(), 1);
    EXPECT_EQ(plans.at(0).engine_id, norm_id()) << plans.describe();
  }
}

TEST(NativeNormalizationPlanning, BuildsForADescriptor) {
  EAGLE_SKIP_WITHOUT_CUDA_BUILD();
  plan::ExecutionPlans plans = plan::ExecutionPlans::create(
      softmax_graph({16384, 4096}, DType::bf16, false), manifest(), hopper());
  EXPECT_EQ(plans.build_plans(), 0);
  EXPECT_EQ(plans.workspace_size(), 0u);
  // Few long rows split: the chunks' partial statistics need a workspace.
  plan::ExecutionPlans few = plan::ExecutionPlans::create(
      softmax_graph({7, 131072}, DType::bf16, false), manifest(), hopper());
  EXPECT_EQ(few.build_plans(), 0);
  EXPECT_EQ(few.workspace_size(), 7u * 32 * 16);  // 32 chunks of 4096 a row, (max, sum) each
  plan::ExecutionPlans few_bwd = plan::ExecutionPlans::create(
      softmax_bwd_graph({7, 131072}, DType::bf16, false), manifest(), hopper());
  EXPECT_EQ(few_bwd.build_plans(), 0);
  EXPECT_EQ(few_bwd.workspace_size(), 7u * 32 * 8);  // a sum per chunk
}

TEST(NativeNormalizationDeclines, AxisOtherThanTheLast) {
  sweep::expect_declines(manifest(), norm_id(), softmax_graph({4, 8}, DType::f32, false, 0),
                         hopper(), {"last axis"});
}

TEST(NativeNormalizationDeclines, F64) {
  sweep::expect_declines(manifest(), norm_id(), softmax_graph({4, 8}, DType::f64, false), hopper(),
                         {"does not serve io dtype f64"});
}

TEST(NativeNormalizationDeclines, ScaleOfAnotherDtype) {
  op::Graph g("mixed");
  const op::Tensor x = g.tensor({"x", {4, 8}, DType::bf16});
  const op::Tensor s = g.tensor({"scale", {8}, DType::f32});
  g.op("layer_norm", {{"x", x}, {"scale", s}}).at("y").set_output(true);
  sweep::expect_declines(manifest(), norm_id(), g, hopper(), {"scale must have x's dtype bf16"});
}

TEST(NativeNormalizationDeclines, StridedInput) {
  op::Graph g("strided");
  const op::Tensor x = g.tensor({"x", {4, 8}, DType::f32, {1, 4}});
  g.op("softmax", {{"x", x}}).at("y").set_output(true);
  sweep::expect_declines(manifest(), norm_id(), g, hopper(), {"'x' must be dense row-major"});
}

TEST(NativeNormalizationDeclines, VirtualOutput) {
  op::Graph g("virtual");
  const op::Tensor x = g.tensor({"x", {4, 8}, DType::f32});
  g.op("softmax", {{"x", x}});
  sweep::expect_declines(manifest(), norm_id(), g, hopper(), {"'y' is virtual"});
}

TEST(NativeNormalizationDeclines, OtherOps) {
  op::Graph g("other");
  const op::Tensor x = g.tensor({"x", {4, 8}, DType::f32});
  g.op("reduction", {{"x", x}}, {{"mode", "sum"}}).at("y").set_output(true);
  // A reduction belongs to another family: pinning the engine to it is refused before it is
  // asked, so ask the engine directly.
  const plan::Engine* e = manifest().engine(norm_id());
  g.freeze();
  expect_throw_with<NotSupported>([&] { e->check_support(g, *plan::base_facts(g), hopper()); },
                                  {"native_normalization", "not reduction"});
}

}  // namespace
}  // namespace eagle::test::native
