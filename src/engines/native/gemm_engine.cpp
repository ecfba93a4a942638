#include "engines/native/gemm_engine.hpp"

#include <algorithm>
#include <vector>

#include "eagle/plan/operand_rules.hpp"
#include "engines/gemm_problem.hpp"
#include "engines/native/gemm/gemm_epilogue.hpp"
#include "engines/native/structured_support.hpp"

namespace eagle::native {

namespace {

using engines::GemmEpilogue;
using engines::GemmProblem;

// The kernel's arguments for `p`, pointers left null.
gemm::EpilogueGemmArgs args_of(const GemmProblem& p) {
  gemm::EpilogueGemmArgs a;
  a.epilogue =
      p.epilogue == GemmEpilogue::gelu ? gemm::Epilogue::gelu : gemm::Epilogue::gelu_backward;
  a.dtype = p.dtype;
  a.m = p.m;
  a.n = p.n;
  a.k = p.k;
  a.lda = p.a.ld;
  a.ldb = p.b.ld;
  a.b_col_major = p.b.col_major;
  a.ldy = p.n;
  a.ld_aux = p.n;  // the kept product, z, or the workspace's scratch: dense [M, N]
  return a;
}

// Declines what the kernels do not serve (the problem's form first, then the kernel's rules).
GemmProblem served_problem(const op::Graph& graph, const std::string& engine) {
  GemmProblem p = engines::gemm_problem(graph, engine);
  require(p.epilogue == GemmEpilogue::gelu || p.epilogue == GemmEpilogue::gelu_backward, engine,
          "serves a matmul with a gelu or gelu_backward epilogue (a plain matmul, relu and "
          "gelu_tanh are cuBLASLt's)");
  require(p.batch == 1, engine,
          "serves one [M, K] x [K, N] product; this is a batch of " + std::to_string(p.batch) +
              " that does not fold into the rows");
  require(!p.a.col_major, engine, "a must be row-major (its rows' K elements packed)");
  require(p.bias_form != engines::BiasForm::matrix, engine,
          "a full [M, N] bias is not served (a bias vector along N is)");
  require(p.bias_form == engines::BiasForm::none || p.epilogue == GemmEpilogue::gelu, engine,
          "gelu_backward's product takes no bias");
  const char* why = gemm::epilogue_gemm_refusal(args_of(p));
  require(!*why, engine, std::string(why) + " (" + p.describe() + ")");
  require(gemm::epilogue_gemm_built(), engine, "this build has no Hopper (sm_90a) kernels");
  return p;
}

class GemmPlan : public plan::CompiledPlan {
 public:
  struct Table {
    gemm::EpilogueGemmArgs args;                      // pointers filled per call
    int a = -1, b = -1, bias = -1, aux = -1, y = -1;  // positions; aux -1: the workspace's
    std::size_t scratch = 0;       // bytes of workspace standing for an unkept product
    std::size_t kernel_bytes = 0;  // CUTLASS's own workspace, after the scratch
    int multiprocessors = 1;
  };
  GemmPlan(plan::OperandRules rules, std::vector<engines::StrideRule> strides, Table t)
      : rules_(std::move(rules)), strides_(std::move(strides)), t_(t) {}

  std::size_t workspace_bytes() const override { return t_.scratch + t_.kernel_bytes; }

  bool run(const plan::OperandBuffer* ops,
           const plan::ExecutionContext& ctx) const noexcept override {
    if (!rules_.match(ops) || ctx.workspace_bytes < workspace_bytes()) return false;
    for (const engines::StrideRule& r : strides_)
      if (!r.match(ops[r.position])) return false;
    // epilogue_gemm refuses (false) pointers off TMA's alignment; explain() names the rule.
    return gemm::epilogue_gemm(bind(ops, ctx), t_.multiprocessors,
                               static_cast<char*>(ctx.workspace) + t_.scratch, ctx.stream);
  }

  void explain(const plan::OperandBuffer* ops, const plan::ExecutionContext& ctx) const override {
    rules_.explain(ops);
    for (const engines::StrideRule& r : strides_) r.explain(ops[r.position], "native_gemm");
    if (ctx.workspace_bytes >= workspace_bytes() && !gemm::epilogue_gemm_aligned(bind(ops, ctx)))
      throw InvalidArgument(
          "native_gemm: every operand must start 16-byte aligned (TMA), one does not");
    explain_refusal(rules_, ops, ctx, workspace_bytes(), "native_gemm");
  }

 private:
  gemm::EpilogueGemmArgs bind(const plan::OperandBuffer* ops,
                              const plan::ExecutionContext& ctx) const noexcept {
    gemm::EpilogueGemmArgs a = t_.args;
    a.a = ops[t_.a].data;
    a.b = ops[t_.b].data;
    a.bias = t_.bias >= 0 ? ops[t_.bias].data : nullptr;
    a.aux = t_.aux >= 0 ? ops[t_.aux].data : ctx.workspace;
    a.y = ops[t_.y].data;
    return a;
  }

  plan::OperandRules rules_;
  std::vector<engines::StrideRule> strides_;
  Table t_;
};

class GemmEngine : public plan::Engine {
 public:
  GemmEngine(int64_t id, const std::string& name) : Engine(id, name) {
    caps_.device = DeviceKind::cuda;
    caps_.sm_lo = caps_.sm_hi = 90;  // wgmma and TMA of sm_90a: Hopper only
    caps_.dtypes = {DType::bf16, DType::f16};
  }
  const plan::Capabilities& capabilities() const override { return caps_; }

  void check_support(const op::Graph& graph, const plan::Facts&,
                     const DeviceProperties&) const override {
    served_problem(graph, name());
  }

  std::shared_ptr<const plan::CompiledPlan> build_plan(
      const op::Graph& graph, const plan::Facts&, const plan::PlanConfig&,
      const plan::BuildContext& ctx) const override {
    const int sms = std::max(1, ctx.device.multiprocessors);
    const GemmProblem p = served_problem(graph, name());
    const Device device = plan_device(ctx);
    plan::OperandRules rules;
    std::vector<engines::StrideRule> strides;
    GemmPlan::Table t;
    t.args = args_of(p);
    t.multiprocessors = sms;
    const auto at = [&](const op::Tensor& x) { return ctx.layout->index_of(x); };
    for (const op::Tensor& x : {p.ta, p.tb}) {  // a and b: any layout the problem read
      rules.add(*ctx.layout, x, device, /*row_major=*/false);
      strides.push_back(engines::stride_rule(*ctx.layout, x, name()));
    }
    t.a = at(p.ta);
    t.b = at(p.tb);
    if (p.tbias.defined()) {
      rules.add(*ctx.layout, p.tbias, device, /*row_major=*/true);
      t.bias = at(p.tbias);
    }
    const op::Tensor aux = p.tz.defined() ? p.tz : p.product;
    if (aux.defined()) {
      rules.add(*ctx.layout, aux, device, /*row_major=*/true);
      t.aux = at(aux);
    } else {  // gelu's product not kept: written to scratch, never read
      t.scratch = round_up_region(static_cast<std::size_t>(p.m * p.n) * itemsize(p.dtype));
    }
    rules.add(*ctx.layout, p.out, device, /*row_major=*/true);
    t.y = at(p.out);
    t.kernel_bytes = gemm::epilogue_gemm_workspace(t.args);
    return std::make_shared<GemmPlan>(std::move(rules), std::move(strides), t);
  }

 private:
  plan::Capabilities caps_;
};

}  // namespace

std::unique_ptr<plan::Engine> make_gemm_engine(int64_t id, const std::string& name) {
  return std::make_unique<GemmEngine>(id, name);
}

}  // namespace eagle::native
