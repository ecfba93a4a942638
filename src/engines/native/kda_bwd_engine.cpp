#include "engines/native/kda_bwd_engine.hpp"

#include <string>

#include "eagle/plan/operand_rules.hpp"
#include "eagle/ragged/capacity.hpp"
#include "engines/native/attention/varlen_kernels.hpp"
#include "engines/native/kda_node.hpp"
#include "engines/native/launch_status.hpp"
#include "engines/native/linear_attention/gdn_bwd_kernels.hpp"
#include "engines/native/linear_attention/kda_bwd_kernels.hpp"
#include "engines/native/structured_support.hpp"

namespace eagle::native {

namespace {

// Declines what the kernels do not serve; the node is a single kda_bwd, gdn_bwd or gdn2_bwd.
// gdn_bwd runs as kda_bwd with its gate broadcast over K (gdn_bwd_kernels.hpp): every option of
// the op maps, so only the dtypes and head dims are declined, as for kda.
void check_node(const op::Node& node, const std::string& engine) {
  require_linear_attention_operands(node, engine, {"k", "v", "d_o"});
  require_f32_gates(node, engine);
  // a_log and dt_bias: gdn's safe_gate.
  for (const char* p : {"a_log", "dt_bias", "initial_state", "d_final_state"}) {
    const op::Tensor t = node.input(p);
    require(!t.defined() || t.dtype() == DType::f32, engine,
            std::string(p) + " must be f32, not " + dtype_text(t));
  }
  require(node.input("cu_seqlens").dims()[0] >= 2, engine, "needs at least one sequence slot");
}

class KdaBwdPlan : public plan::CompiledPlan {
 public:
  struct Table {
    kda::Shape shape;
    int64_t capacity = 0;  // ragged::chunk_capacity(T, N, 64)
    bool gdn = false;      // gdn_bwd: through kda::gdn_backward
    bool safe_gate = false, beta_sigmoid = false;
    // Positions (-1: not wired / not received).
    int q, k, v, g, beta, b, w, cu, h0, d_o, dht, a_log, dt_bias;
    int dq, dk, dv, dg, dbeta, db, dw, dh0, d_a_log, d_dt_bias;
  };
  KdaBwdPlan(plan::OperandRules rules, Table t) : rules_(std::move(rules)), t_(t) {}

  std::size_t offsets_bytes() const {
    return round_up_region(static_cast<std::size_t>(t_.shape.slots + 1) * sizeof(int32_t));
  }
  std::size_t workspace_bytes() const override {
    return offsets_bytes() + (t_.gdn ? kda::gdn_backward_workspace_bytes(t_.shape, t_.capacity)
                                     : kda::backward_workspace_bytes(t_.shape, t_.capacity));
  }

  bool run(const plan::OperandBuffer* ops,
           const plan::ExecutionContext& ctx) const noexcept override {
    if (!rules_.match(ops) || ctx.workspace_bytes < workspace_bytes()) return false;
    auto* offsets = static_cast<int32_t*>(ctx.workspace);
    const auto* cu = static_cast<const int32_t*>(ops[t_.cu].data);
    const attention::TileOffsetsJob job{cu, t_.shape.rows, kda::kChunk, offsets};
    if (!attention::tile_offsets_launch(&job, 1, t_.shape.slots, ctx.stream))
      return launch_succeeded(), false;
    auto ptr = [&](int at) { return at >= 0 ? ops[at].data : nullptr; };
    auto f32 = [&](int at) { return static_cast<float*>(ptr(at)); };
    kda::BwdArgs a;
    a.shape = t_.shape;
    a.shape.cu = cu;
    a.q = ptr(t_.q);
    a.k = ptr(t_.k);
    a.v = ptr(t_.v);
    a.g = f32(t_.g);
    a.beta = f32(t_.beta);
    a.b = f32(t_.b);
    a.w = f32(t_.w);
    a.initial_state = f32(t_.h0);
    a.d_o = ptr(t_.d_o);
    a.d_final_state = f32(t_.dht);
    a.dq = ptr(t_.dq);
    a.dk = ptr(t_.dk);
    a.dv = ptr(t_.dv);
    a.dg = f32(t_.dg);
    a.dbeta = f32(t_.dbeta);
    a.db = f32(t_.db);
    a.dw = f32(t_.dw);
    a.d_initial_state = f32(t_.dh0);
    a.chunk_offsets = offsets;
    a.capacity_chunks = t_.capacity;
    void* kernels_ws = static_cast<char*>(ctx.workspace) + offsets_bytes();
    if (t_.gdn) {
      kda::GdnBwdArgs ga;
      ga.base = a;
      ga.base.g = nullptr;
      ga.base.dg = nullptr;
      ga.g = f32(t_.g);
      ga.a_log = f32(t_.a_log);
      ga.dt_bias = f32(t_.dt_bias);
      ga.safe_gate = t_.safe_gate;
      ga.use_beta_sigmoid = t_.beta_sigmoid;
      ga.dg = f32(t_.dg);
      ga.d_a_log = f32(t_.d_a_log);
      ga.d_dt_bias = f32(t_.d_dt_bias);
      if (!kda::gdn_backward(ga, kernels_ws, ctx.stream)) return launch_succeeded(), false;
      return true;
    }
    if (!kda::backward(a, kernels_ws, ctx.stream)) return launch_succeeded(), false;
    return true;
  }
  void explain(const plan::OperandBuffer* ops, const plan::ExecutionContext& ctx) const override {
    explain_refusal(rules_, ops, ctx, workspace_bytes(), "native kda/gdn/gdn2 backward");
  }

 private:
  plan::OperandRules rules_;
  Table t_;
};

plan::Capabilities kda_bwd_capabilities() {
  plan::Capabilities caps;
  caps.device = DeviceKind::cuda;
  caps.sm_lo = caps.sm_hi = 90;  // built for sm_90a only
  // The io dtype the facts name is the graph's first float input; the gates are f32, so the
  // precise per-port rule is check_node's.
  caps.dtypes = {DType::bf16, DType::f16, DType::f32};
  // 0 flat, 1 persistent, 2 persistent for the slot launches alone (the recompute's state,
  // dstate), 3 for the chunk launches alone (the recompute's prepare, dmat, dqkg): as native_kda.
  caps.knobs["schedule"] = {0, 1, 2, 3};
  // The recompute's prepare launch: 0 the wide layout, 1 the compact one (kda::Shape). 1 leads,
  // as in the forward; measured on the H200 (kda bf16, H 32, K = V = 128, T 32768 N 8,
  // 2026-12-05): prepare 1 intra 1 20.2 ms, prepare 0 intra 1 22.9, prepare 1 intra 0 25.6,
  // prepare 0 intra 0 28.2.
  // 2: the compact layout with its products' fragments built in registers, as native_kda's.
  // 2 leads: measured on an H100 (as above, intra 1 dstate 2 state 2, 2026-12-06) 14.35 ms
  // against 14.63 for 1.
  caps.knobs["prepare"] = {2, 1, 0};
  // The recompute's state launch: 1 pipelined, 0 not; the forward's kernel, whose pipelined
  // loop was measured faster there (native_kda's knob `pipeline`), so 1 leads.
  caps.knobs["pipeline"] = {1, 0};
  // The recompute's state launch: one CTA per 32 columns (0), per head (1) or the state
  // transposed in registers (2), as native_kda's knob `state`; 2 leads (measured: see dstate). 3:
  // 2 with the sequences past a balanced share split over two CTAs (native_kda's 3); 3 leads
  // (measured: see dstate).
  caps.knobs["state"] = {3, 2, 0, 1};
  // The decay-weighted products: 0 exactly per channel on CUDA cores, 1 on the tensor cores
  // through a reference row per 16-row block (kda::Shape). 1 leads (measured: see prepare).
  caps.knobs["intra"] = {1, 0};
  // The dstate launch: 0 copies each chunk's tiles before computing it, 1 the previous chunk's
  // while computing this one (kda::Shape), 2 dh transposed in registers, each warp's 16 value
  // columns a reverse recurrence of their own (kda_bwd_dstate_rows.cuh), one barrier per chunk.
  // 2 leads: measured on an H100 (kda bf16, H 32, K = V = 128, T 32768 N 8, prepare 1 intra 1,
  // 2026-12-06) dstate 2 state 2 16.66 ms, dstate 2 state 0 17.14, dstate 0 19.47, dstate 1 21.39.
  // 3: 2 with the sequences past a balanced share split over two CTAs (as `state` 3). State 3
  // dstate 3 lead: bench 14c (H100, zipf lengths, 2026-12-07, session 23) 14.55 / 15.44 / 2.201
  // ms at T 32768 N 8, T 32768 N 64, T 4096 N 32 against 15.28 / 15.44 / 2.198 for state 2
  // dstate 2 (gdn's backward: 15.41 / 16.29 / 2.317 against 16.15 / 16.25 / 2.317).
  caps.knobs["dstate"] = {3, 2, 0, 1};
  return caps;
}

class KdaBwdEngine : public plan::Engine {
 public:
  KdaBwdEngine(int64_t id, const std::string& name)
      : Engine(id, name), caps_(kda_bwd_capabilities()) {}
  const plan::Capabilities& capabilities() const override { return caps_; }

  void check_support(const op::Graph& graph, const plan::Facts&,
                     const DeviceProperties&) const override {
    const op::Node node = single_node(graph, name(), {"kda_bwd", "gdn_bwd", "gdn2_bwd"});
    check_node(node, name());
    require(kda::served(kda_shape_of(node)), name(),
            "no kernel in this build for " + dtype_text(node.input("q")) + " head dim " +
                std::to_string(node.input("q").dims()[2]) +
                " (bf16/f16, 64 or 128, sm_90a builds)");
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
    auto in = [&](const char* p) {
      const op::Tensor t = node.input(p);
      return t.defined() ? ctx.layout->index_of(t) : -1;
    };
    auto out = [&](const char* p) {
      const op::Tensor t = node.output(p);
      return t.defined() && receives(t) ? ctx.layout->index_of(t) : -1;
    };
    KdaBwdPlan::Table t{};
    t.shape = kda_shape_of(node);
    t.shape.compact_prepare = config.knobs.at("prepare") != 0;
    t.shape.fragment_products = config.knobs.at("prepare") == 2;
    t.shape.pipelined_state = config.knobs.at("pipeline") != 0;
    t.shape.head_state = config.knobs.at("state") == 1;
    t.shape.state_rows = config.knobs.at("state") >= 2;
    t.shape.split_state_rows = config.knobs.at("state") == 3;
    t.shape.tensor_core_backward = config.knobs.at("intra") != 0;
    t.shape.pipelined_dstate = config.knobs.at("dstate") == 1;
    t.shape.dstate_rows = config.knobs.at("dstate") >= 2;
    t.shape.split_dstate_rows = config.knobs.at("dstate") == 3;
    const int64_t schedule = config.knobs.at("schedule");
    t.shape.persistent = schedule == 1 || schedule == 3;
    t.shape.persistent_state = schedule == 1 || schedule == 2;
    t.capacity = ragged::chunk_capacity(t.shape.rows, t.shape.slots, kda::kChunk);
    const bool gdn2 = node.op() == "gdn2_bwd";
    t.gdn = node.op() == "gdn_bwd";
    t.safe_gate = t.gdn && node.flag("safe_gate");
    t.beta_sigmoid = t.gdn && node.flag("use_beta_sigmoid");
    t.q = in("q");
    t.k = in("k");
    t.v = in("v");
    t.g = in("g");
    t.beta = gdn2 ? -1 : in("beta");
    t.b = gdn2 ? in("b") : -1;
    t.w = gdn2 ? in("w") : -1;
    t.cu = in("cu_seqlens");
    t.h0 = in("initial_state");
    t.d_o = in("d_o");
    t.dht = in("d_final_state");
    t.dq = out("dq");
    t.dk = out("dk");
    t.dv = out("dv");
    t.dg = out("dg");
    t.dbeta = gdn2 ? -1 : out("dbeta");
    t.db = gdn2 ? out("db") : -1;
    t.dw = gdn2 ? out("dw") : -1;
    t.dh0 = t.h0 >= 0 ? out("d_initial_state") : -1;
    t.a_log = t.safe_gate ? in("a_log") : -1;
    t.dt_bias = t.safe_gate ? in("dt_bias") : -1;
    t.d_a_log = t.safe_gate ? out("d_a_log") : -1;
    t.d_dt_bias = t.safe_gate ? out("d_dt_bias") : -1;
    return std::make_shared<KdaBwdPlan>(std::move(rules), t);
  }

 private:
  plan::Capabilities caps_;
};

}  // namespace

std::unique_ptr<plan::Engine> make_kda_bwd_engine(int64_t id, const std::string& name) {
  return std::make_unique<KdaBwdEngine>(id, name);
}

}  // namespace eagle::native
