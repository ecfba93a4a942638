// The cuBLASLt engine. Without a GPU: the library hidden by the environment (the engine declines
// naming why, planning still succeeds), knob errors, declines planned against a stand-in device,
// and the gemm family's ranking. With a GPU (cuda:0, skipped otherwise): every case against the
// reference engine (float64 on the CPU) on fresh random inputs, the output poisoned with NaN.
//
// Tolerance rule (relative error ||got - ref|| / ||ref||, METHOD.md), scaled for K. Inputs reach
// both sides already rounded to their dtype, so what differs is the engine's arithmetic:
//  * f32 accumulation: each of the K partial sums is rounded once, independently, so the error
//    grows like sqrt(K) * 2^-24 relative to a result whose size grows like sqrt(K) * |a b|, at
//    most ~sqrt(K) * 2^-24 relative; allowed 8x that, never under METHOD's f32 floor of 1e-6.
//  * tf32: each input rounded to 10 explicit mantissa bits (2^-11 relative); the errors of the K
//    products add like c itself, so the relative error stays near 2^-11 * sqrt(2) whatever K
//    (METHOD: "near 3e-4"); allowed 2e-3.
//  * f16 / bf16 results: one rounding of the f32 result to the output dtype dominates, the
//    method's per-dtype tolerance (2e-3, 1e-2) plus the f32 term.
//  * the GELU epilogue evaluates tanh in f32 (CublasLtEpilogue.GeluIsTheTanhForm checks which
//    formula, element by element): 2e-5 more for f32 results.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <numbers>
#include <string>
#include <vector>

#include "dense.hpp"
#include "eagle/engines/cublaslt.hpp"
#include "engine_sweep.hpp"
#include "engines/cublaslt/api.hpp"
#include "engines/cublaslt/cublaslt_engine.hpp"
#include "engines/cublaslt/gemm_plan.hpp"
#include "engines/reference/reference_engine.hpp"
#include "gemm_operands.hpp"
#include "oracles/structured.hpp"
#include "poison.hpp"
#include "test_util.hpp"

namespace eagle::test {
namespace {

using op::Dims;

const plan::Manifest& manifest() {
  return engines::builtin_manifest();
}
int64_t cublaslt_id() {
  return sweep::engine_id(manifest(), "gemm", "cublaslt");
}

op::Graph small_gemm(DType dtype = DType::f32) {
  op::Graph g("gemm");
  g.matmul(g.tensor({"a", {3, 7}, dtype}), g.tensor({"b", {7, 5}, dtype})).set_output(true);
  return g;
}

plan::Knobs knobs(int64_t algo, int64_t tf32 = 0, int64_t workspace_mb = 32,
                  int64_t sm_share = 100) {
  return {{"algo", algo}, {"tf32", tf32}, {"workspace_mb", workspace_mb}, {"sm_share", sm_share}};
}

// ---- the library hidden by the environment ----

const cublaslt::Loaded& hidden_library() {
  static const cublaslt::Loaded lib = [] {
    EnvGuard env("EAGLE_CUBLASLT_LIBRARY");
    env.set("/nonexistent");
    return cublaslt::load();
  }();
  return lib;
}

std::unique_ptr<plan::Engine> make_hidden(int64_t id, const std::string& name) {
  return cublaslt::make_cublaslt_engine_from(id, name, &hidden_library);
}

// The gemm family of the built-in manifest, its cuBLASLt reading the hidden library.
plan::ManifestSpec hidden_spec() {
  plan::ManifestSpec spec;
  spec.families = {{"gemm",
                    1,
                    {"matmul"},
                    nullptr,
                    nullptr,
                    {{"reference", &reference::make_reference_engine, false},
                     {"cublaslt", &make_hidden, false}}}};
  return spec;
}
const plan::Manifest& hidden_manifest() {
  static const plan::Manifest m(hidden_spec());
  return m;
}

TEST(CublasLtLibrary, HiddenByTheEnvironmentSaysWhere) {
  const cublaslt::Loaded& lib = hidden_library();
  EXPECT_FALSE(lib.ok);
  EXPECT_NE(lib.status.find("cuBLASLt"), std::string::npos) << lib.status;
#ifdef EAGLE_HAVE_CUDA
  EXPECT_NE(lib.status.find("EAGLE_CUBLASLT_LIBRARY=/nonexistent"), std::string::npos)
      << lib.status;
#endif
}

#ifdef EAGLE_HAVE_CUDA
TEST(CublasLtLibrary, AnotherLibraryLacksTheEntryPoints) {
  EnvGuard env("EAGLE_CUBLASLT_LIBRARY");
  env.set("libm.so.6");
  const cublaslt::Loaded lib = cublaslt::load();
  EXPECT_FALSE(lib.ok);
  EXPECT_NE(lib.status.find("lacks cublasLtCreate"), std::string::npos) << lib.status;
}

TEST(CublasLtLibrary, LoadsFromAFolderTheEnvironmentNames) {
  const char* dir = "/usr/local/cuda/lib64";
  if (!std::ifstream(std::string(dir) + "/libcublasLt.so.13")) GTEST_SKIP() << "no toolkit here";
  EnvGuard env("EAGLE_CUBLASLT_LIBRARY");
  env.set(dir);
  const cublaslt::Loaded lib = cublaslt::load();
  EXPECT_TRUE(lib.ok) << lib.status;
  // The path is the file the loader holds: another copy of the same file may have been opened
  // first (the loader keeps one).
  EXPECT_NE(lib.status.find("loaded from /"), std::string::npos) << lib.status;
  EXPECT_NE(lib.status.find("libcublasLt.so.13"), std::string::npos) << lib.status;
  EXPECT_EQ(lib.version / 10000, 13u);
}
#endif

TEST(CublasLtLibrary, TheProcessStatusIsTheEnginesReason) {
  const std::string status = engines::cublaslt_status();
  EXPECT_EQ(status, cublaslt::process().status);
  EXPECT_EQ(status.find('\n'), std::string::npos);
  EXPECT_EQ(status.find("loaded from") != std::string::npos, cublaslt::process().ok) << status;
}

TEST(CublasLtDeclines, AHiddenLibraryDeclinesNamingWhyAndPlanningStillSucceeds) {
  const int64_t id = hidden_manifest().engine_id("gemm", 1);
  // Pinned on a GPU: the decline carries the loader's reason.
  sweep::expect_declines(hidden_manifest(), id, small_gemm(), stand_in_gpu(90),
                         {hidden_library().status});
  // Ranked on a GPU: cuBLASLt is listed, and every entry's decline is in the error.
  plan::ExecutionPlans gpu =
      plan::ExecutionPlans::create(small_gemm(), hidden_manifest(), stand_in_gpu(90));
  ASSERT_GE(gpu.count(), 1);
  EXPECT_EQ(gpu.at(0).engine_id, id);
  expect_throw_with<NotSupported>([&] { gpu.build_plans(); }, {hidden_library().status});
  // On the CPU the reference builds.
  plan::ExecutionPlans cpu = plan::ExecutionPlans::create(small_gemm(), hidden_manifest(),
                                                          DeviceProperties::query(Device::cpu()));
  EXPECT_EQ(cpu.name_at(cpu.build_plans()), "reference");
}

// ---- declines planned against a stand-in device ----

TEST(CublasLtDeclines, GraphsItDoesNotServe) {
  const DeviceProperties gpu = stand_in_gpu(90);
  {
    op::Graph g;
    const op::Tensor c = g.matmul(g.tensor({"a", {3, 7}}), g.tensor({"b", {7, 5}}));
    g.pointwise("gelu", c).set_output(true);
    sweep::expect_declines(manifest(), cublaslt_id(), g, gpu, {"gelu (erf form)"});
  }
  {
    op::Graph g;
    g.matmul(g.tensor({"a", {3, 7}, DType::f32, {14, 2}}), g.tensor({"b", {7, 5}}))
        .set_output(true);
    sweep::expect_declines(manifest(), cublaslt_id(), g, gpu, {"neither row-major nor"});
  }
  {
    op::Graph g;
    g.matmul(g.tensor({"a", {3, 7}}), g.tensor({"b", {7, 5}}), g.tensor({"z", {3, 1}}))
        .set_output(true);
    sweep::expect_declines(manifest(), cublaslt_id(), g, gpu, {"broadcast along N"});
  }
  {
    op::Graph g;
    g.matmul(g.tensor({"a", {2, 1, 4, 6}}), g.tensor({"b", {3, 6, 5}})).set_output(true);
    sweep::expect_declines(manifest(), cublaslt_id(), g, gpu, {"no single batch stride"});
  }
  {
    op::Graph g;
    g.matmul(g.tensor({"a", {3, 7}, DType::f64}), g.tensor({"b", {7, 5}, DType::f64}))
        .set_output(true);
    sweep::expect_declines(manifest(), cublaslt_id(), g, gpu, {"f64"});
  }
}

TEST(CublasLtDeclines, ADescriptorAloneCannotChooseTheAlgorithm) {
  if (!cublaslt::process().ok) GTEST_SKIP() << cublaslt::process().status;
  sweep::expect_declines(manifest(), cublaslt_id(), small_gemm(), stand_in_gpu(90),
                         {"attached CUDA device"});
}

TEST(CublasLtDeclines, Tf32IsForF32Only) {
  if (!cublaslt::process().ok) GTEST_SKIP() << cublaslt::process().status;
  plan::ExecutionPlans plans = plan::ExecutionPlans::create_for(
      small_gemm(DType::bf16), manifest(), stand_in_gpu(90), cublaslt_id(), knobs(0, 1));
  expect_throw_with<NotSupported>([&] { plans.build_plans(); },
                                  {"cublaslt", "tf32=1 applies to f32", "bf16"});
}

// ---- knobs ----

TEST(CublasLtKnobs, OutsideTheDomainIsAnError) {
  auto pin = [](const plan::Knobs& k) {
    plan::ExecutionPlans::create_for(small_gemm(), manifest(), stand_in_gpu(90), cublaslt_id(), k);
  };
  expect_invalid([&] { pin(knobs(16)); }, "knob 'algo' = 16 is outside its domain");
  expect_invalid([&] { pin(knobs(0, 2)); }, "knob 'tf32' = 2 is outside its domain");
  expect_invalid([&] { pin(knobs(0, 0, 64)); }, "knob 'workspace_mb' = 64 is outside its domain");
  expect_invalid(
      [&] {
        pin({{"algo", 0}, {"tf32", 0}, {"sm_share", 0}});
      },
      "knob 'workspace_mb' is not named");
  expect_invalid([&] { pin(knobs(0, 0, 32, 50)); }, "knob 'sm_share' = 50 is outside its domain");
  plan::Knobs extra = knobs(0);
  extra["tile"] = 128;
  expect_invalid([&] { pin(extra); }, "knob 'tile' is not declared");
}

TEST(CublasLtKnobs, TheDomainsNameTheAlgorithm) {
  const plan::Capabilities& caps = manifest().engine(cublaslt_id())->capabilities();
  EXPECT_EQ(caps.knobs.at("algo"),
            (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}));
  EXPECT_EQ(caps.knobs.at("workspace_mb"), (std::vector<int64_t>{32, 0}));
  EXPECT_EQ(caps.knobs.at("tf32"), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(caps.knobs.at("sm_share"), (std::vector<int64_t>{0, 100, 75}));
  EXPECT_EQ(caps.device, DeviceKind::cuda);
  EXPECT_EQ(caps.sm_lo, 80);
}

// ---- the gemm family's ranking ----

TEST(CublasLtRanking, HeuristicEntriesInOrderThenTheFallback) {
  plan::ExecutionPlans plans = plan::ExecutionPlans::create(
      small_gemm(), manifest(), stand_in_gpu(90), {plan::HeurMode::A, plan::HeurMode::FALLBACK});
  EXPECT_EQ(plans.family(), "gemm");
  ASSERT_EQ(plans.count(), 17) << plans.describe();
  for (int i = 0; i < 16; ++i) {
    EXPECT_EQ(plans.at(i).engine_id, cublaslt_id());
    EXPECT_EQ(plans.at(i).knobs, knobs(i, 0, 32, 0));
    EXPECT_EQ(plans.at(i).mode, plan::HeurMode::A);
  }
  EXPECT_EQ(plans.at(16).knobs, knobs(0, 0, 0, 0));
  EXPECT_EQ(plans.at(16).mode, plan::HeurMode::FALLBACK);
}

TEST(CublasLtSmShare, FewTilesGetThreeQuartersOfTheSmsByTheRule) {
  // [512, 512]: 16 tiles of 128 x 128, at most a quarter of 132 SMs: 99 of them.
  EXPECT_EQ(cublaslt::sm_count_target(512, 512, 1, 132, 0), 99);
  // 33 tiles still; 34 not (4 x 34 > 132); a batch counts its tiles.
  EXPECT_EQ(cublaslt::sm_count_target(33 * 128, 128, 1, 132, 0), 99);
  EXPECT_EQ(cublaslt::sm_count_target(34 * 128, 128, 1, 132, 0), 0);
  EXPECT_EQ(cublaslt::sm_count_target(512, 512, 3, 132, 0), 0);
  // [4096, 512]: 128 tiles fill the SMs: all of them.
  EXPECT_EQ(cublaslt::sm_count_target(4096, 512, 1, 132, 0), 0);
  // A fixed share, whatever the shape; 100 and an unknown SM count mean all.
  EXPECT_EQ(cublaslt::sm_count_target(4096, 4096, 1, 132, 75), 99);
  EXPECT_EQ(cublaslt::sm_count_target(512, 512, 1, 132, 100), 0);
  EXPECT_EQ(cublaslt::sm_count_target(512, 512, 1, 0, 0), 0);
}

TEST(CublasLtRanking, OnTheCpuOnlyTheReference) {
  plan::ExecutionPlans plans = engines::create_execution_plans(small_gemm(), Device::cpu());
  ASSERT_EQ(plans.count(), 1);
  EXPECT_EQ(plans.name_at(plans.build_plans()), "reference");
}

// ---- against the reference engine, on cuda:0 ----

enum class Bias { none, vector, batch_vector, matrix };

struct GemmCase {
  std::string name;
  int64_t m = 1, n = 1, k = 1;
  Dims a_batch, b_batch;
  bool a_t = false, b_t = false;  // stored column-major (transposed layouts)
  Bias bias = Bias::none;
  std::string epilogue;  // "", "relu", "gelu_tanh"
  DType dtype = DType::f32;
  int64_t tf32 = 0;
  int64_t sm_share = 100;  // the knob (gemm_plan.hpp)
  std::string full_name() const {
    return name + "_" + std::string(dtype_name(dtype)) + (tf32 ? "_tf32" : "") +
           (sm_share != 100 ? "_sm" + std::to_string(sm_share) : "");
  }
};
void PrintTo(const GemmCase& c, std::ostream* os) {
  *os << c.full_name();
}

Dims broadcast(const Dims& a, const Dims& b) {
  Dims out(std::max(a.size(), b.size()), 1);
  for (std::size_t i = 0; i < out.size(); ++i) {
    const int64_t x = i < out.size() - a.size() ? 1 : a[i - (out.size() - a.size())];
    const int64_t y = i < out.size() - b.size() ? 1 : b[i - (out.size() - b.size())];
    out[i] = std::max(x, y);
  }
  return out;
}

struct GemmGraph {
  op::Graph graph;
  op::Tensor a, b, bias, out;
};
GemmGraph gemm_graph(const GemmCase& c, const GemmOperand& a, const GemmOperand& b,
                     const GemmOperand* bias, bool declared_strides) {
  GemmGraph g{op::Graph("gemm_" + c.name), {}, {}, {}, {}};
  g.a = g.graph.tensor({"a", a.dims, c.dtype, declared_strides ? a.strides : Dims{}});
  g.b = g.graph.tensor({"b", b.dims, c.dtype, declared_strides ? b.strides : Dims{}});
  if (bias) g.bias = g.graph.tensor({"bias", bias->dims, c.dtype});
  g.out = g.graph.matmul(g.a, g.b, g.bias);
  if (!c.epilogue.empty()) g.out = g.graph.pointwise(c.epilogue, g.out);
  g.out.set_output(true).set_name("out");
  return g;
}

double tolerance_for(const GemmCase& c) {
  const double acc = std::max(1e-6, 8 * std::sqrt(static_cast<double>(c.k)) * std::ldexp(1.0, -24));
  if (c.dtype != DType::f32) return tolerance(c.dtype) + acc;
  const double gelu = c.epilogue == "gelu_tanh" ? 2e-5 : 0.0;
  return (c.tf32 ? 2e-3 : acc) + gelu;
}

// Runs the built plan as an executor would: on a stream of `device`, with the handle of the
// library it declares and the workspace it asks for; waits for it.
void execute_on(const plan::ExecutionPlans& plans, const plan::VariantPack& pack, Device device) {
  const Stream stream(device);
  const Library* lib = plans.compiled()->library();
  ASSERT_NE(lib, nullptr);
  void* handle = lib->create(device, stream.native());
  const std::size_t ws_bytes = plans.workspace_size();
  const Array ws =
      ws_bytes ? Array::empty({static_cast<int64_t>(ws_bytes)}, DType::u8, device) : Array();
  CallContext ctx;
  ctx.stream = stream.native();
  ctx.handle = handle;
  ctx.workspace = ws_bytes ? ws.data() : nullptr;
  ctx.workspace_bytes = ws_bytes;
  ctx.device = device;
  plans.execute(pack, ctx);
  stream.synchronize();
  lib->destroy(handle);
}

std::string skip_reason() {
  const std::string why = sweep::unavailable(manifest(), cublaslt_id());
  if (!why.empty()) return why;
  return cublaslt::process().ok ? "" : cublaslt::process().status;
}

class CublasLtGemm : public ::testing::TestWithParam<GemmCase> {
 protected:
  void SetUp() override {
    const std::string why = skip_reason();
    if (!why.empty()) GTEST_SKIP() << why;
  }
};

TEST_P(CublasLtGemm, MatchesTheReference) {
  const GemmCase& c = GetParam();
  const Device gpu = Device::cuda(0);
  const GemmOperand a = make_operand(c.a_batch, c.m, c.k, c.a_t);
  const GemmOperand b = make_operand(c.b_batch, c.k, c.n, c.b_t);
  const Dims out_batch = broadcast(c.a_batch, c.b_batch);
  GemmOperand bias;
  if (c.bias == Bias::vector) bias = make_operand({}, 1, c.n, false), bias.dims = {c.n};
  if (c.bias == Bias::batch_vector) bias = make_operand(out_batch, 1, c.n, false);
  if (c.bias == Bias::matrix) bias = make_operand({}, c.m, c.n, false);
  const GemmOperand* biasp = c.bias == Bias::none ? nullptr : &bias;

  // The engine, pinned; transposed operands passed as strided views of their column-major store.
  GemmGraph eg = gemm_graph(c, a, b, biasp, /*declared_strides=*/true);
  plan::ExecutionPlans plans = plan::ExecutionPlans::create_for(
      eg.graph, manifest(), gpu, cublaslt_id(), knobs(0, c.tf32, 32, c.sm_share));
  try {
    plans.build_plans();
  } catch (const NotSupported& e) {
    FAIL() << "cublaslt declined: " << e.what();
  }
  const Array a_store =
      from_doubles(a.stored, {static_cast<int64_t>(a.stored.size())}, c.dtype, gpu);
  const Array b_store =
      from_doubles(b.stored, {static_cast<int64_t>(b.stored.size())}, c.dtype, gpu);
  Array bias_dev;
  plan::VariantPack pack(plans.layout());
  pack.set(eg.a, plan::Operand::raw(a_store.data(), a.dims, c.dtype, gpu, a.strides));
  pack.set(eg.b, plan::Operand::raw(b_store.data(), b.dims, c.dtype, gpu, b.strides));
  if (biasp) {
    bias_dev = from_doubles(bias.logical, bias.dims, c.dtype, gpu);
    pack.set(eg.bias, plan::Operand(bias_dev));
  }
  const Array got = poisoned(eg.out.dims(), c.dtype, gpu);
  pack.set(eg.out, plan::Operand(got));
  execute_on(plans, pack, gpu);

  // The reference engine on the CPU, over the same values in dense row-major arrays.
  GemmGraph rg = gemm_graph(c, a, b, biasp, /*declared_strides=*/false);
  plan::ExecutionPlans ref =
      plan::ExecutionPlans::create_for(rg.graph, manifest(), DeviceProperties::query(Device::cpu()),
                                       sweep::engine_id(manifest(), "gemm", "reference"), {});
  ref.build_plans();
  plan::VariantPack ref_pack(ref.layout());
  const Array ha = from_doubles(a.logical, a.dims, c.dtype, Device::cpu());
  const Array hb = from_doubles(b.logical, b.dims, c.dtype, Device::cpu());
  ref_pack.set(rg.a, ha).set(rg.b, hb);
  Array hbias;
  if (biasp) {
    hbias = from_doubles(bias.logical, bias.dims, c.dtype, Device::cpu());
    ref_pack.set(rg.bias, hbias);
  }
  const Array want = poisoned(rg.out.dims(), c.dtype, Device::cpu());
  ref_pack.set(rg.out, want);
  ref.execute(ref_pack, {});

  const double err = rel_error(values(got), values(want));
  EXPECT_TRUE(err <= tolerance_for(c))
      << "relative error " << err << " > " << tolerance_for(c) << " (K " << c.k << ")";
}

GemmCase make_case(std::string name, int64_t m, int64_t n, int64_t k, Dims a_batch = {},
                   Dims b_batch = {}, bool a_t = false, bool b_t = false, Bias bias = Bias::none,
                   std::string epilogue = "") {
  GemmCase c;
  c.name = std::move(name);
  c.m = m, c.n = n, c.k = k;
  c.a_batch = std::move(a_batch), c.b_batch = std::move(b_batch);
  c.a_t = a_t, c.b_t = b_t;
  c.bias = bias;
  c.epilogue = std::move(epilogue);
  return c;
}

std::vector<GemmCase> gemm_cases() {
  std::vector<GemmCase> base = {
      make_case("1x1x1", 1, 1, 1),
      make_case("3x5x7", 3, 5, 7),
      make_case("127x129x65", 127, 129, 65),
      make_case("513x1000x257", 513, 1000, 257),
      make_case("a_t", 127, 129, 65, {}, {}, true),
      make_case("b_t", 127, 129, 65, {}, {}, false, true),
      make_case("ab_t", 3, 5, 7, {}, {}, true, true),
      make_case("batched", 33, 17, 9, {4}, {4}),
      make_case("batched_b_t", 33, 17, 9, {3}, {3}, false, true),
      make_case("b_broadcast", 31, 29, 15, {2, 3}, {}),
      make_case("a_broadcast", 31, 29, 15, {}, {5}),
      make_case("bias_vector", 127, 129, 65, {}, {}, false, false, Bias::vector),
      make_case("bias_per_batch", 33, 17, 9, {4}, {4}, false, false, Bias::batch_vector),
      make_case("b_broadcast_bias_per_batch", 31, 29, 15, {3}, {}, false, false,
                Bias::batch_vector),
      make_case("bias_matrix", 3, 5, 7, {}, {}, false, false, Bias::matrix),
      make_case("bias_matrix_batched", 31, 29, 15, {3}, {}, false, false, Bias::matrix),
      make_case("relu", 127, 129, 65, {}, {}, false, false, Bias::none, "relu"),
      make_case("relu_bias", 127, 129, 65, {}, {}, false, false, Bias::vector, "relu"),
      make_case("gelu_tanh", 127, 129, 65, {}, {}, false, false, Bias::none, "gelu_tanh"),
      make_case("gelu_tanh_bias", 127, 129, 65, {}, {}, false, false, Bias::vector, "gelu_tanh"),
      make_case("relu_batched_a_t", 33, 17, 9, {2}, {2}, true, false, Bias::vector, "relu"),
      make_case("linear_gelu_tanh", 31, 29, 15, {2, 3}, {}, false, false, Bias::vector,
                "gelu_tanh"),
  };
  std::vector<GemmCase> out;
  for (const GemmCase& c : base)
    for (const auto& [dtype, tf32] : {std::pair{DType::f32, 0}, std::pair{DType::f32, 1},
                                      std::pair{DType::f16, 0}, std::pair{DType::bf16, 0}}) {
      GemmCase x = c;
      x.dtype = dtype;
      x.tf32 = tf32;
      out.push_back(x);
    }
  // A weight gradient's shape (few output tiles, a long K, a^T b) planned for fewer SMs: by the
  // rule (sm_share 0: three quarters of them here) and by a fixed share; and for all of them.
  for (int64_t share : {0, 75, 100}) {
    GemmCase c = make_case("weight_grad", 192, 136, 4104, {}, {}, true, false);
    c.dtype = DType::bf16;
    c.sm_share = share;
    out.push_back(c);
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(cublaslt, CublasLtGemm, ::testing::ValuesIn(gemm_cases()),
                         [](const ::testing::TestParamInfo<GemmCase>& i) {
                           return i.param.full_name();
                         });

// ---- the algorithm knob on cuda:0 ----

TEST(CublasLtAlgorithms, EntryZeroBuildsAndEntriesPastTheListDecline) {
  const std::string why = skip_reason();
  if (!why.empty()) GTEST_SKIP() << why;
  int built = 0;
  for (int64_t algo = 0; algo < 16; ++algo) {
    plan::ExecutionPlans plans = plan::ExecutionPlans::create_for(
        small_gemm(DType::bf16), manifest(), Device::cuda(0), cublaslt_id(), knobs(algo));
    try {
      plans.build_plans();
      ++built;
      EXPECT_LE(plans.workspace_size(), std::size_t{32} << 20);
    } catch (const NotSupported& e) {
      EXPECT_GT(algo, 0) << e.what();
      EXPECT_NE(std::string(e.what()).find("past its end"), std::string::npos) << e.what();
    }
  }
  EXPECT_GE(built, 1);
  // Ranked: the first entry (cuBLASLt, algo 0) builds.
  plan::ExecutionPlans ranked = engines::create_execution_plans(small_gemm(), Device::cuda(0));
  EXPECT_EQ(ranked.build_plans(), 0);
  EXPECT_EQ(ranked.at(0).engine_id, cublaslt_id());
}

// What run() refuses, explain() names, and nothing runs: a missing handle, strides other than
// the plan's layout, an address not aligned to its element. An address aligned to the element
// but not to 256 bytes runs the fallback algorithm.
TEST(CublasLtRefusals, ExplainNamesTheRule) {
  const std::string why = skip_reason();
  if (!why.empty()) GTEST_SKIP() << why;
  const Device gpu = Device::cuda(0);
  op::Graph g("refusals");
  const op::Tensor a = g.tensor({"a", {64, 96}});
  const op::Tensor b = g.tensor({"b", {96, 80}});
  const op::Tensor c = g.matmul(a, b).set_output(true);
  plan::ExecutionPlans plans =
      plan::ExecutionPlans::create_for(g, manifest(), gpu, cublaslt_id(), knobs(0, 0, 0));
  plans.build_plans();
  EXPECT_EQ(plans.workspace_size(), 0u);  // workspace_mb = 0
  const Array av = random_array({64 * 96 + 4}, DType::f32, gpu);
  const Array bv = random_array({96, 80}, DType::f32, gpu);
  const Array out = poisoned({64, 80}, DType::f32, gpu);
  auto pack_with = [&](const plan::Operand& a_operand) {
    plan::VariantPack pack(plans.layout());
    pack.set(a, a_operand).set(b, bv).set(c, out);
    return pack;
  };
  const Stream stream(gpu);
  CallContext ctx = CallContext::on(stream);
  const plan::VariantPack plain =
      pack_with(plan::Operand::raw(av.data(), {64, 96}, DType::f32, gpu));
  expect_invalid([&] { plans.execute(plain, ctx); }, {"cublaslt", "no cuBLASLt handle"});
  void* handle = plans.compiled()->library()->create(gpu, stream.native());
  ctx.handle = handle;
  expect_invalid(
      [&] {
        plans.execute(pack_with(plan::Operand::raw(av.data(), {64, 96}, DType::f32, gpu, {1, 64})),
                      ctx);
      },
      {"operand a", "strides [1,64]", "built for [96,1]"});
  char* bytes = static_cast<char*>(av.data());
  expect_invalid(
      [&] {
        plans.execute(pack_with(plan::Operand::raw(bytes + 2, {64, 96}, DType::f32, gpu)), ctx);
      },
      {"not even aligned to its element size"});
  stream.synchronize();
  for (double v : values(out)) ASSERT_TRUE(std::isnan(v)) << "a refused call wrote its output";

  // One element past the allocation's start: 4-byte aligned, the fallback algorithm.
  plans.execute(pack_with(plan::Operand::raw(bytes + 4, {64, 96}, DType::f32, gpu)), ctx);
  stream.synchronize();
  plans.compiled()->library()->destroy(handle);
  const std::vector<double> all = values(av);
  const Dense shifted =
      make_dense({64, 96}, std::vector<double>(all.begin() + 1, all.begin() + 1 + 64 * 96));
  EXPECT_CLOSE(values(out), oracle::matmul(shifted, to_dense(bv)).data, 1e-5);
}

// Which GELU cuBLASLt's epilogue computes: c = x exactly (K = 1, b = 1, f32 without tf32), x
// where the two forms differ most (|x| in [2.5, 4]: 1e-4 to 4e-4 apart, 10% of the result for
// negative x). A tanh form lands within 1e-5 of gelu_tanh; were it the erf form
// (or a coarse tanh), gelu_tanh would be declined instead.
TEST(CublasLtEpilogue, GeluIsTheTanhForm) {
  const std::string why = skip_reason();
  if (!why.empty()) GTEST_SKIP() << why;
  const Device gpu = Device::cuda(0);
  constexpr int64_t kRows = 256, kCols = 4;
  op::Graph g("gelu_form");
  const op::Tensor a = g.tensor({"a", {kRows, 1}});
  const op::Tensor b = g.tensor({"b", {1, kCols}});
  const op::Tensor y = g.pointwise("gelu_tanh", g.matmul(a, b)).set_output(true);
  plan::ExecutionPlans plans =
      plan::ExecutionPlans::create_for(g, manifest(), gpu, cublaslt_id(), knobs(0));
  plans.build_plans();
  const std::vector<double> x = random_signed(kRows, 2.5, 4.0);
  const Array xa = from_doubles(x, {kRows, 1}, DType::f32, gpu);
  const Array ones = from_doubles(std::vector<double>(kCols, 1.0), {1, kCols}, DType::f32, gpu);
  const Array out = poisoned({kRows, kCols}, DType::f32, gpu);
  plan::VariantPack pack(plans.layout());
  pack.set(a, xa).set(b, ones).set(y, out);
  execute_on(plans, pack, gpu);
  const std::vector<double> got = values(out);
  double erf_gap = 0;
  for (int64_t i = 0; i < kRows; ++i) {
    const double v = static_cast<float>(x[static_cast<std::size_t>(i)]);
    const double tanh_form =
        0.5 * v * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (v + 0.044715 * v * v * v)));
    const double erf_form = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    for (int64_t j = 0; j < kCols; ++j) {
      const double o = got[static_cast<std::size_t>(i * kCols + j)];
      // cuBLASLt's tanh is approximate: up to 4.1e-6 off, absolute, on the H200 (x = 3.52 and
      // x = -3.42); the erf form is at least 1e-4 away on these x.
      EXPECT_NEAR(o, tanh_form, 1e-5)
          << "x = " << v << ": cuBLASLt's GELU is not gelu_tanh (erf form " << erf_form << ")";
      erf_gap = std::max(erf_gap, std::fabs(o - erf_form));
    }
  }
  EXPECT_GT(erf_gap, 1e-4) << "indistinguishable from the erf form on these inputs";
}

}  // namespace
}  // namespace eagle::test
