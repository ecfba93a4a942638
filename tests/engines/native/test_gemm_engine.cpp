// The native GEMM engine (a matmul with a gelu or gelu_backward epilogue: our CUTLASS Hopper
// kernels). On a Hopper GPU (skipped elsewhere): every form
// against the reference engine (float64 on the CPU) on fresh random inputs, outputs poisoned
// with NaN, b row-major and as a transposed view, sizes off the 128 x 128 tile. Everywhere: its
// declines and its place in the gemm family's ranking.
//
// Tolerance (relative error, METHOD.md): f32 accumulation (~sqrt(K) 2^-24, allowed 8x), one
// rounding of each result to its dtype (tolerance(dtype)), and the product the epilogue reads
// rounded nowhere (as the reference: f32 in the kernel, float64 there).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cuda_build.hpp"
#include "dense.hpp"
#include "engines/native/gemm/gemm_epilogue.hpp"
#include "gemm_operands.hpp"
#include "native_structured.hpp"
#include "poison.hpp"

namespace eagle::test::native {
namespace {

using op::Dims;

int64_t gemm_id() {
  return engine("gemm", "native_gemm");
}

enum class Form { gelu_kept, gelu_bias_kept, gelu, gelu_backward };

struct GemmEpilogueCase {
  Form form;
  DType dtype;
  bool b_col_major;
  int64_t m, n, k;
};

std::string form_name(Form f) {
  switch (f) {
    case Form::gelu_kept:
      return "gelu_kept";
    case Form::gelu_bias_kept:
      return "gelu_bias_kept";
    case Form::gelu:
      return "gelu";
    case Form::gelu_backward:
      return "gelu_backward";
  }
  return "";
}

std::string case_name(const ::testing::TestParamInfo<GemmEpilogueCase>& info) {
  const GemmEpilogueCase& c = info.param;
  return form_name(c.form) + "_" + std::string(dtype_name(c.dtype)) +
         (c.b_col_major ? "_bT_" : "_") + std::to_string(c.m) + "x" + std::to_string(c.n) + "x" +
         std::to_string(c.k);
}

// The graph: c = a @ b (+ bias), then gelu(c) (c kept where the form says) or
// gelu_backward(c, z). Strides declared (b's transposed view) or dense.
struct EpilogueGraph {
  op::Graph graph{"gemm_epilogue"};
  op::Tensor a, b, bias, z, c, y;
};
EpilogueGraph epilogue_graph(const GemmEpilogueCase& k, const GemmOperand& b,
                             bool declared_strides) {
  EpilogueGraph g;
  g.a = g.graph.tensor({"a", {k.m, k.k}, k.dtype});
  g.b = g.graph.tensor({"b", b.dims, k.dtype, declared_strides ? b.strides : Dims{}});
  if (k.form == Form::gelu_bias_kept) g.bias = g.graph.tensor({"bias", {k.n}, k.dtype});
  g.c = g.graph.matmul(g.a, g.b, g.bias);
  if (k.form == Form::gelu_backward) {
    g.z = g.graph.tensor({"z", {k.m, k.n}, k.dtype});
    g.y = g.graph.pointwise("gelu_backward", g.c, g.z);
  } else {
    g.y = g.graph.pointwise("gelu", g.c);
  }
  if (k.form == Form::gelu_kept || k.form == Form::gelu_bias_kept)
    g.c.set_output(true).set_name("c");
  g.y.set_output(true).set_name("y");
  return g;
}

double tolerance_for(const GemmEpilogueCase& c) {
  return tolerance(c.dtype) + 8 * std::sqrt(static_cast<double>(c.k)) * std::ldexp(1.0, -24);
}

// A GPU case of the engine: skipped unless it runs here.
template <class Param>
class NativeGemmCase : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override { EAGLE_SKIP_UNLESS_RUNS_HERE(gemm_id()); }
};

// Runs the built `plans` on a stream of cuda:0 with the workspace they ask for; waits.
void execute_on_gpu(const plan::ExecutionPlans& plans, const plan::VariantPack& pack) {
  const Device gpu = Device::cuda(0);
  const Stream stream(gpu);
  const std::size_t ws_bytes = plans.workspace_size();
  const Array ws =
      ws_bytes ? Array::empty({static_cast<int64_t>(ws_bytes)}, DType::u8, gpu) : Array();
  plans.execute(pack, {stream.native(), nullptr, ws_bytes ? ws.data() : nullptr, ws_bytes});
  stream.synchronize();
}

class NativeGemmEpilogue : public NativeGemmCase<GemmEpilogueCase> {};

TEST_P(NativeGemmEpilogue, MatchesTheReference) {
  const GemmEpilogueCase& c = GetParam();
  const Device gpu = Device::cuda(0), cpu = Device::cpu();
  const GemmOperand a = make_operand({}, c.m, c.k, false);
  const GemmOperand b = make_operand({}, c.k, c.n, c.b_col_major);
  // z spans gelu's curved part ([-3, 3]); the bias shifts the products a little.
  const std::vector<double> bias = random_values(static_cast<std::size_t>(c.n), -0.5, 0.5);
  const std::vector<double> z = random_values(static_cast<std::size_t>(c.m * c.n), -3, 3);

  EpilogueGraph eg = epilogue_graph(c, b, /*declared_strides=*/true);
  plan::ExecutionPlans plans =
      plan::ExecutionPlans::create_for(eg.graph, manifest(), gpu, gemm_id(), {});
  try {
    plans.build_plans();
  } catch (const NotSupported& e) {
    FAIL() << "native_gemm declined: " << e.what();
  }
  const Array a_dev = from_doubles(a.logical, a.dims, c.dtype, gpu);
  const Array b_store =
      from_doubles(b.stored, {static_cast<int64_t>(b.stored.size())}, c.dtype, gpu);
  const Array bias_dev = from_doubles(bias, {c.n}, c.dtype, gpu);
  const Array z_dev = from_doubles(z, {c.m, c.n}, c.dtype, gpu);
  const Array y = poisoned({c.m, c.n}, c.dtype, gpu), prod = poisoned({c.m, c.n}, c.dtype, gpu);
  plan::VariantPack pack(plans.layout());
  pack.set(eg.a, plan::Operand(a_dev));
  pack.set(eg.b, plan::Operand::raw(b_store.data(), b.dims, c.dtype, gpu, b.strides));
  if (eg.bias.defined()) pack.set(eg.bias, plan::Operand(bias_dev));
  if (eg.z.defined()) pack.set(eg.z, plan::Operand(z_dev));
  if (!eg.c.is_virtual()) pack.set(eg.c, plan::Operand(prod));
  pack.set(eg.y, plan::Operand(y));
  execute_on_gpu(plans, pack);

  // The reference engine on the CPU, over the same values in dense row-major arrays.
  EpilogueGraph rg = epilogue_graph(c, b, /*declared_strides=*/false);
  plan::ExecutionPlans ref = plan::ExecutionPlans::create_for(
      rg.graph, manifest(), DeviceProperties::query(cpu), engine("gemm", "reference"), {});
  ref.build_plans();
  plan::VariantPack ref_pack(ref.layout());
  const Array ha = from_doubles(a.logical, a.dims, c.dtype, cpu);
  const Array hb = from_doubles(b.logical, b.dims, c.dtype, cpu);
  const Array hbias = from_doubles(bias, {c.n}, c.dtype, cpu);
  const Array hz = from_doubles(z, {c.m, c.n}, c.dtype, cpu);
  const Array want_y = poisoned({c.m, c.n}, c.dtype, cpu),
              want_c = poisoned({c.m, c.n}, c.dtype, cpu);
  ref_pack.set(rg.a, ha).set(rg.b, hb).set(rg.y, want_y);
  if (rg.bias.defined()) ref_pack.set(rg.bias, hbias);
  if (rg.z.defined()) ref_pack.set(rg.z, hz);
  if (!rg.c.is_virtual()) ref_pack.set(rg.c, want_c);
  ref.execute(ref_pack, {});

  const double tol = tolerance_for(c);
  const double err_y = rel_error(values(y), values(want_y));
  EXPECT_TRUE(err_y <= tol) << "y: relative error " << err_y << " > " << tol;
  if (!eg.c.is_virtual()) {
    const double err_c = rel_error(values(prod), values(want_c));
    EXPECT_TRUE(err_c <= tol) << "c: relative error " << err_c << " > " << tol;
  }
}

std::vector<GemmEpilogueCase> epilogue_cases() {
  std::vector<GemmEpilogueCase> out;
  for (Form f : {Form::gelu_kept, Form::gelu_bias_kept, Form::gelu, Form::gelu_backward})
    for (DType d : {DType::bf16, DType::f16})
      for (bool bt : {false, true}) out.push_back({f, d, bt, 300, 200, 136});
  // Many tiles (a persistent grid over 132 SMs), and one tile's worth less than a tile.
  out.push_back({Form::gelu_kept, DType::bf16, false, 4096, 512, 512});
  out.push_back({Form::gelu_backward, DType::bf16, true, 4096, 512, 512});
  out.push_back({Form::gelu_backward, DType::f16, false, 5, 8, 8});
  return out;
}

INSTANTIATE_TEST_SUITE_P(native_gemm, NativeGemmEpilogue, ::testing::ValuesIn(epilogue_cases()),
                         case_name);

// ---- everywhere: declines and ranking ----

op::Graph gelu_graph(Dims a_dims, Dims b_dims, DType dtype, const char* epilogue = "gelu") {
  op::Graph g("mm_gelu");
  op::Tensor c = g.matmul(g.tensor({"a", std::move(a_dims), dtype}),
                          g.tensor({"b", std::move(b_dims), dtype}));
  if (std::string(epilogue).empty()) {
    c.set_output(true);
    return g;
  }
  g.pointwise(epilogue, c).set_output(true);
  return g;
}

TEST(NativeGemmDeclines, WhatTheKernelsDoNotServe) {
  const DeviceProperties h = hopper();
  sweep::expect_declines(manifest(), gemm_id(), gelu_graph({64, 32}, {32, 16}, DType::bf16, ""), h,
                         {"serves a matmul with a gelu or gelu_backward epilogue", "cuBLASLt's"});
  sweep::expect_declines(manifest(), gemm_id(), gelu_graph({64, 32}, {32, 16}, DType::bf16, "relu"),
                         h, {"relu and gelu_tanh are cuBLASLt's"});
  sweep::expect_declines(manifest(), gemm_id(), gelu_graph({64, 32}, {32, 16}, DType::f32), h,
                         {"f32"});
  sweep::expect_declines(manifest(), gemm_id(), gelu_graph({64, 32}, {32, 12}, DType::bf16), h,
                         {"N and K must be multiples of 8", "M 64 N 12 K 32"});
  sweep::expect_declines(manifest(), gemm_id(), gelu_graph({3, 64, 32}, {3, 32, 16}, DType::f16), h,
                         {"a batch of 3 that does not fold into the rows"});
  op::Graph at("a_transposed");
  at.pointwise("gelu", at.matmul(at.tensor({"a", {64, 32}, DType::bf16, {1, 64}}),
                                 at.tensor({"b", {32, 16}, DType::bf16})))
      .set_output(true);
  sweep::expect_declines(manifest(), gemm_id(), at, h, {"a must be row-major"});
}

TEST(NativeGemmDeclines, OffHopper) {
  sweep::expect_declines(manifest(), gemm_id(), gelu_graph({64, 32}, {32, 16}, DType::bf16),
                         stand_in_gpu(80), {"sm"});
}

TEST(NativeGemmPlanning, LeadsForAGeluEpilogue) {
  EAGLE_SKIP_WITHOUT_CUDA_BUILD();
  if (!::eagle::native::gemm::epilogue_gemm_built())
    GTEST_SKIP() << "this build has no sm_90a kernels";
  for (const char* epilogue : {"gelu", "gelu_backward"}) {
    op::Graph g("mm_epilogue");
    const op::Tensor c = g.matmul(g.tensor({"a", {4096, 512}, DType::bf16}),
                                  g.tensor({"b", {512, 512}, DType::bf16}));
    if (std::string(epilogue) == "gelu")
      g.pointwise("gelu", c).set_output(true);
    else
      g.pointwise("gelu_backward", c, g.tensor({"z", {4096, 512}, DType::bf16})).set_output(true);
    plan::ExecutionPlans plans = plan::ExecutionPlans::create(g, manifest(), hopper());
    const int built = plans.build_plans();
    EXPECT_EQ(plans.at(built).engine_id, gemm_id()) << epilogue << "\n" << plans.describe();
  }
}

}  // namespace
}  // namespace eagle::test::native
