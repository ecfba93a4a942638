#include "engines/native/gdn_engine.hpp"

#include <cmath>

#include "eagle/plan/operand_rules.hpp"
#include "eagle/ragged/capacity.hpp"
#include "engines/native/attention/varlen_kernels.hpp"
#include "engines/native/launch_status.hpp"
#include "engines/native/linear_attention/gdn_kernels.hpp"
#include "engines/native/structured_support.hpp"

namespace eagle::native {

namespace {

namespace la = linear_attention;

// Declines what the kernels do not serve.
void check_node(const op::Node& node, const std::string& engine) {
  require_linear_attention_operands(node, engine, {"k", "v"});
  for (const char* p : {"g", "beta", "a_log", "dt_bias", "initial_state"}) {
    const op::Tensor t = node.input(p);
    if (t.defined()) require_float_io(t.dtype(), p, engine);
  }
  const op::Tensor a_log = node.input("a_log"), dt_bias = node.input("dt_bias");
  if (a_log.defined() && dt_bias.defined())
    require(a_log.dtype() == dt_bias.dtype(), engine, "a_log and dt_bias must share one dtype");
}

la::GdnShape shape_of(const op::Node& node) {
  const op::Tensor q = node.input("q"), v = node.input("v");
  la::GdnShape s;
  s.slots = node.input("cu_seqlens").dims()[0] - 1;
  s.tokens = q.dims()[0];
  s.heads = static_cast<int>(q.dims()[1]);
  s.value_heads = static_cast<int>(v.dims()[1]);
  s.key_dim = static_cast<int>(q.dims()[2]);
  s.value_dim = static_cast<int>(v.dims()[2]);
  s.scale = node.has_attr("scale")
                ? static_cast<float>(node.attr("scale").as_real("scale"))
                : static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.key_dim)));
  s.use_qk_l2norm = node.flag("use_qk_l2norm");
  s.safe_gate = node.flag("safe_gate");
  s.use_beta_sigmoid = node.flag("use_beta_sigmoid");
  s.dtype = q.dtype();
  s.g_dtype = node.input("g").dtype();
  s.beta_dtype = node.input("beta").dtype();
  if (node.input("a_log").defined()) s.param_dtype = node.input("a_log").dtype();
  if (node.input("initial_state").defined()) s.state_dtype = node.input("initial_state").dtype();
  return s;
}

class GdnPlan : public plan::CompiledPlan {
 public:
  struct Table {
    la::GdnShape shape;
    int64_t capacity_chunks;
    std::size_t kernels_at;                               // after the chunk offsets
    int q, k, v, g, beta, cu, a_log, dt_bias, h0, o, hN;  // positions (-1: none)
  };
  GdnPlan(plan::OperandRules rules, Table t) : rules_(std::move(rules)), t_(t) {}

  std::size_t workspace_bytes() const override {
    return t_.kernels_at + la::gdn_workspace_bytes(t_.shape, t_.capacity_chunks);
  }

  // The 16-byte vector loads and stores of the kernels.
  bool aligned(const plan::OperandBuffer* ops) const noexcept {
    for (int i : {t_.q, t_.k, t_.v, t_.o})
      if (!aligned16(ops[i].data)) return false;
    return true;
  }

  bool run(const plan::OperandBuffer* ops,
           const plan::ExecutionContext& ctx) const noexcept override {
    if (!rules_.match(ops) || ctx.workspace_bytes < workspace_bytes() || !aligned(ops))
      return false;
    auto* offsets = static_cast<int32_t*>(ctx.workspace);
    const auto* cu = static_cast<const int32_t*>(ops[t_.cu].data);
    const attention::TileOffsetsJob job{cu, t_.shape.tokens, la::kGdnChunk, offsets};
    if (!attention::tile_offsets_launch(&job, 1, t_.shape.slots, ctx.stream))
      return launch_succeeded(), false;
    auto data = [&](int i) { return i >= 0 ? ops[i].data : nullptr; };
    la::GdnArgs a;
    a.shape = t_.shape;
    a.cu_seqlens = cu;
    a.chunk_offsets = offsets;
    a.capacity_chunks = t_.capacity_chunks;
    a.q = data(t_.q);
    a.k = data(t_.k);
    a.v = data(t_.v);
    a.g = data(t_.g);
    a.beta = data(t_.beta);
    a.a_log = data(t_.a_log);
    a.dt_bias = data(t_.dt_bias);
    a.initial_state = data(t_.h0);
    a.o = data(t_.o);
    a.final_state = data(t_.hN);
    if (!la::gdn_forward(a, static_cast<char*>(ctx.workspace) + t_.kernels_at, ctx.stream))
      return launch_succeeded(), false;
    return true;
  }
  void explain(const plan::OperandBuffer* ops, const plan::ExecutionContext& ctx) const override {
    if (rules_.match(ops) && ctx.workspace_bytes >= workspace_bytes() && !aligned(ops))
      throw InvalidArgument("native gdn: q, k, v and o must start 16-byte aligned");
    explain_refusal(rules_, ops, ctx, workspace_bytes(), "native gdn");
  }

 private:
  plan::OperandRules rules_;
  Table t_;
};

plan::Capabilities gdn_capabilities() {
  plan::Capabilities caps;
  caps.device = DeviceKind::cuda;
  caps.sm_lo = caps.sm_hi = 90;  // built for sm_90a only
  caps.dtypes = {DType::bf16, DType::f16};
  // The state launch: 1 prefetches the next chunk's rows with cp.async (double-buffered), 0
  // loads each chunk's before computing it. The prepare launch's (I + A)^-1: 1 by 16 x 16
  // blocks on all 128 threads, 0 column by column on 64. 1 and 1 lead: measured on the H200
  // (bench 14a, bf16, H 32, K = V = 128, 2026-12-05) 7.74 / 7.87 / 1.14 ms at T 32768 N 8,
  // T 32768 N 64, T 4096 N 32 against 10.31 / 10.27 / 1.42 ms for 0 and 0 (pipeline alone:
  // 9.10 / 9.33 / 1.35 ms).
  caps.knobs["pipeline"] = {1, 0};
  // The state launch: 0 one CTA per 32 columns, 1 one CTA per head (its 32-column groups of
  // warps sharing the chunk's W and k rows), 2 the state transposed in registers (native_kda's
  // knob of the same name). 2 leads: measured on an H100 (bench 14a, bf16, H 32, K = V = 128,
  // 2026-12-06) 3.58 / 3.26 / 0.517 ms at T 32768 N 8, T 32768 N 64, T 4096 N 32 against
  // 4.05 / 4.08 / 0.589 ms for 0 and 3.96 / 4.03 / 0.605 for 1. 3: 2 with two CTAs per
  // (sequence, head), the sequences past a balanced share split over both: 2.385 / 2.488 / 0.391
  // ms against 2's 2.659 / 2.454 / 0.382 (H100, 2026-12-07, before the split's 1.25x margin).
  // With the margin (a sequence splits only past 1.25x its balanced share) 3 leads: 2.230 /
  // 2.287 / 0.362 ms against 2's 2.499 / 2.288 / 0.359 (H100, 2026-12-07, session 23).
  caps.knobs["state"] = {3, 2, 0, 1};
  caps.knobs["solve"] = {1, 0};
  // 0 flat (a CTA per task of the capacity), 1 persistent (resident CTAs looping over tasks),
  // 2 persistent for the state launch only, 3 for the chunk launches (prepare, output) only: the
  // schedule measured per stage.
  caps.knobs["schedule"] = {0, 1, 2, 3};
  // The prepare launch: 0 the wide layout (two CTAs per SM), 1 the compact one (three). 1 leads:
  // measured on the H200 (bench 14a, as native_kda's, 2026-12-05) 4.59 / 4.68 / 0.70 ms against
  // 5.01 / 5.14 / 0.76 ms for 0.
  caps.knobs["prepare"] = {1, 0};
  // The prepare launch's W and U stores and the output launch's o stores: 1 staged through
  // shared memory and written in 16-byte pieces, 0 each lane's 4-byte fragment pairs (native_kda's
  // knob of the same name, where 1 measured 3% faster: 5.68 against 5.85 ms). Untimed here.
  caps.knobs["stores"] = {1, 0};
  return caps;
}

class GdnEngine : public plan::Engine {
 public:
  GdnEngine(int64_t id, const std::string& name) : Engine(id, name), caps_(gdn_capabilities()) {}
  const plan::Capabilities& capabilities() const override { return caps_; }

  void check_support(const op::Graph& graph, const plan::Facts&,
                     const DeviceProperties&) const override {
    const op::Node node = single_node(graph, name(), {"gdn"});
    check_node(node, name());
    require_output(node, "o", name());
    require(la::gdn_serves(shape_of(node)), name(),
            "no gdn kernel in this build (sm_90a builds serve bf16/f16, K = V in {64, 128})");
  }

  std::shared_ptr<const plan::CompiledPlan> build_plan(
      const op::Graph& graph, const plan::Facts&, const plan::PlanConfig& config,
      const plan::BuildContext& ctx) const override {
    const op::Node node = graph.nodes()[0];
    const Device device = plan_device(ctx);
    plan::OperandRules rules;
    for (const auto& [port, t] : node.inputs()) rules.add(*ctx.layout, t, device, true);
    for (const auto& [port, t] : node.outputs())
      if (receives(t)) rules.add(*ctx.layout, t, device, true);
    auto at = [&](const op::Tensor& t) { return t.defined() ? ctx.layout->index_of(t) : -1; };
    GdnPlan::Table t{};
    t.shape = shape_of(node);
    t.shape.pipelined_state = config.knobs.at("pipeline") != 0;
    t.shape.head_state = config.knobs.at("state") == 1;
    t.shape.state_rows = config.knobs.at("state") >= 2;
    t.shape.split_state_rows = config.knobs.at("state") == 3;
    t.shape.blocked_solve = config.knobs.at("solve") != 0;
    const int64_t schedule = config.knobs.at("schedule");
    t.shape.persistent = schedule == 1 || schedule == 3;
    t.shape.persistent_state = schedule == 1 || schedule == 2;
    t.shape.compact_prepare = config.knobs.at("prepare") != 0;
    t.shape.staged_stores = config.knobs.at("stores") != 0;
    t.capacity_chunks = ragged::chunk_capacity(t.shape.tokens, t.shape.slots, la::kGdnChunk);
    t.kernels_at = round_up_region(static_cast<std::size_t>(t.shape.slots + 1) * sizeof(int32_t));
    t.q = at(node.input("q"));
    t.k = at(node.input("k"));
    t.v = at(node.input("v"));
    t.g = at(node.input("g"));
    t.beta = at(node.input("beta"));
    t.cu = at(node.input("cu_seqlens"));
    t.a_log = at(node.input("a_log"));
    t.dt_bias = at(node.input("dt_bias"));
    t.h0 = at(node.input("initial_state"));
    t.o = at(node.output("o"));
    const op::Tensor fin = node.output("final_state");
    t.hN = fin.defined() && receives(fin) ? at(fin) : -1;
    return std::make_shared<GdnPlan>(std::move(rules), t);
  }

 private:
  plan::Capabilities caps_;
};

}  // namespace

std::unique_ptr<plan::Engine> make_gdn_engine(int64_t id, const std::string& name) {
  return std::make_unique<GdnEngine>(id, name);
}

}  // namespace eagle::native
