#include "engines/native/attention_engine.hpp"

#include <cmath>

#include "eagle/plan/operand_rules.hpp"
#include "eagle/ragged/capacity.hpp"
#include "engines/native/attention/varlen_kernels.hpp"
#include "engines/native/launch_status.hpp"
#include "engines/native/structured_support.hpp"

namespace eagle::native {

namespace {

namespace va = attention;

// Declines what the kernels do not serve; the node is a single sdpa or sdpa_bwd.
void check_node(const op::Node& node, const std::string& engine) {
  const op::Tensor q = node.input("q"), k = node.input("k"), v = node.input("v");
  const op::Tensor cq = node.input("cu_seqlens_q"), ck = node.input("cu_seqlens_kv");
  require(cq.defined() && ck.defined(), engine,
          "serves the THD layout (cu_seqlens_q and cu_seqlens_kv), not dense [B, S, H, D]");
  require(cq.dtype() == DType::i32 && ck.dtype() == DType::i32, engine,
          "cu_seqlens must be i32, not " + std::string(dtype_name(cq.dtype())));
  require(q.dtype() == DType::bf16 || q.dtype() == DType::f16, engine,
          "q must be bf16 or f16, not " + std::string(dtype_name(q.dtype())));
  for (const auto& [port, t] : node.inputs()) {
    require(port.rfind("cu_seqlens", 0) == 0 || port == "stats" || t.dtype() == q.dtype(), engine,
            "every data tensor must have q's dtype; '" + port + "' is " +
                std::string(dtype_name(t.dtype())));
    require(!t.ragged_offset().defined(), engine,
            "tensor '" + t.name() + "' has a ragged offset (sequences apart): not served");
    require_row_major(t, engine);
  }
  for (const auto& [port, t] : node.outputs()) require_row_major(t, engine);
  require(q.dims()[2] == v.dims()[2] && k.dims()[2] == q.dims()[2], engine,
          "needs value dim == head dim, got " + std::to_string(v.dims()[2]) + " and " +
              std::to_string(q.dims()[2]));
}

va::VarlenShape shape_of(const op::Node& node) {
  const op::Tensor q = node.input("q"), k = node.input("k");
  va::VarlenShape s;
  s.slots = node.input("cu_seqlens_q").dims()[0] - 1;
  s.rows_q = q.dims()[0];
  s.rows_kv = k.dims()[0];
  s.heads = static_cast<int>(q.dims()[1]);
  s.kv_heads = static_cast<int>(k.dims()[1]);
  s.head_dim = static_cast<int>(q.dims()[2]);
  s.value_dim = static_cast<int>(node.input("v").dims()[2]);
  s.causal = node.attr("causal").as_bool("causal");
  s.scale = node.has_attr("scale")
                ? static_cast<float>(node.attr("scale").as_real("scale"))
                : static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.head_dim)));
  s.dtype = q.dtype();
  return s;
}

// A task grid over one side's tiles of `block` rows, its offsets at `offsets_at` bytes into the
// workspace.
struct GridPlan {
  va::TaskGrid grid;
  std::size_t offsets_at = 0;
  int64_t rows = 0, block = 0;
  int cu = -1;  // position of the side's cu_seqlens
};

GridPlan grid_plan(const va::VarlenShape& s, bool q_side, int block, int64_t schedule,
                   int multiprocessors, int cu_position, std::size_t offsets_at) {
  GridPlan g;
  g.rows = q_side ? s.rows_q : s.rows_kv;
  g.block = block;
  g.cu = cu_position;
  g.offsets_at = offsets_at;
  g.grid.schedule = schedule ? va::Schedule::persistent : va::Schedule::flat;
  g.grid.capacity_tiles = ragged::chunk_capacity(g.rows, s.slots, block);
  g.grid.multiprocessors = multiprocessors;
  return g;
}

std::size_t offsets_bytes(const va::VarlenShape& s) {
  return round_up_region(static_cast<std::size_t>(s.slots + 1) * sizeof(int32_t));
}

// Launches the tile offsets of `grids` into the workspace and points each grid at its array.
bool launch_offsets(const plan::OperandBuffer* ops, const plan::ExecutionContext& ctx,
                    const va::VarlenShape& s, GridPlan* grids, int count) noexcept {
  va::TileOffsetsJob jobs[3];
  for (int i = 0; i < count; ++i) {
    auto* out = reinterpret_cast<int32_t*>(static_cast<char*>(ctx.workspace) + grids[i].offsets_at);
    grids[i].grid.tile_offsets = out;
    jobs[i] = {static_cast<const int32_t*>(ops[grids[i].cu].data), grids[i].rows, grids[i].block,
               out};
  }
  return va::tile_offsets_launch(jobs, count, s.slots, ctx.stream) || (launch_succeeded(), false);
}

class AttentionFwdPlan : public plan::CompiledPlan {
 public:
  struct Table {
    va::VarlenShape shape;
    GridPlan grid;
    int q, k, v, cu_kv, o, stats;  // positions (stats -1: not received)
  };
  AttentionFwdPlan(plan::OperandRules rules, Table t) : rules_(std::move(rules)), t_(t) {}

  std::size_t workspace_bytes() const override { return offsets_bytes(t_.shape); }

  bool run(const plan::OperandBuffer* ops,
           const plan::ExecutionContext& ctx) const noexcept override {
    if (!rules_.match(ops) || ctx.workspace_bytes < workspace_bytes()) return false;
    if (t_.grid.grid.capacity_tiles == 0) return true;
    GridPlan grid = t_.grid;
    if (!launch_offsets(ops, ctx, t_.shape, &grid, 1)) return false;
    va::FwdArgs a;
    a.shape = t_.shape;
    a.shape.cu_q = static_cast<const int32_t*>(ops[grid.cu].data);
    a.shape.cu_kv = static_cast<const int32_t*>(ops[t_.cu_kv].data);
    a.q = ops[t_.q].data;
    a.k = ops[t_.k].data;
    a.v = ops[t_.v].data;
    a.o = ops[t_.o].data;
    a.lse = t_.stats >= 0 ? static_cast<float*>(ops[t_.stats].data) : nullptr;
    a.grid = grid.grid;
    if (!va::varlen_fwd(a, ctx.stream)) return launch_succeeded(), false;
    return true;
  }
  void explain(const plan::OperandBuffer* ops, const plan::ExecutionContext& ctx) const override {
    explain_refusal(rules_, ops, ctx, workspace_bytes(), "native sdpa");
  }

 private:
  plan::OperandRules rules_;
  Table t_;
};

class AttentionBwdPlan : public plan::CompiledPlan {
 public:
  struct Table {
    va::VarlenShape shape;
    GridPlan kv_grid, q_grid;
    bool deterministic;
    std::size_t kernels_at;  // the kernels' own workspace
    int q, k, v, o, d_o, stats, dq, dk, dv;
  };
  AttentionBwdPlan(plan::OperandRules rules, Table t) : rules_(std::move(rules)), t_(t) {}

  std::size_t workspace_bytes() const override {
    return t_.kernels_at + va::bwd_workspace_bytes(t_.shape, t_.deterministic);
  }

  bool run(const plan::OperandBuffer* ops,
           const plan::ExecutionContext& ctx) const noexcept override {
    if (!rules_.match(ops) || ctx.workspace_bytes < workspace_bytes()) return false;
    if (t_.q_grid.grid.capacity_tiles == 0 && t_.kv_grid.grid.capacity_tiles == 0) return true;
    GridPlan grids[2] = {t_.kv_grid, t_.q_grid};
    if (!launch_offsets(ops, ctx, t_.shape, grids, 2)) return false;
    va::BwdArgs a;
    a.shape = t_.shape;
    a.shape.cu_q = static_cast<const int32_t*>(ops[t_.q_grid.cu].data);
    a.shape.cu_kv = static_cast<const int32_t*>(ops[t_.kv_grid.cu].data);
    a.q = ops[t_.q].data;
    a.k = ops[t_.k].data;
    a.v = ops[t_.v].data;
    a.o = ops[t_.o].data;
    a.d_o = ops[t_.d_o].data;
    a.lse = static_cast<const float*>(ops[t_.stats].data);
    a.dq = ops[t_.dq].data;
    a.dk = ops[t_.dk].data;
    a.dv = ops[t_.dv].data;
    a.deterministic = t_.deterministic;
    a.kv_grid = grids[0].grid;
    a.q_grid = grids[1].grid;
    if (!va::varlen_bwd(a, static_cast<char*>(ctx.workspace) + t_.kernels_at, ctx.stream))
      return launch_succeeded(), false;
    return true;
  }
  void explain(const plan::OperandBuffer* ops, const plan::ExecutionContext& ctx) const override {
    explain_refusal(rules_, ops, ctx, workspace_bytes(), "native sdpa_bwd");
  }

 private:
  plan::OperandRules rules_;
  Table t_;
};

plan::Capabilities attention_capabilities(bool backward) {
  plan::Capabilities caps;
  caps.device = DeviceKind::cuda;
  caps.sm_lo = caps.sm_hi = 90;  // wgmma and TMA of sm_90a: Hopper only
  caps.dtypes = {DType::bf16, DType::f16};
  caps.knobs["schedule"] = {0, 1};  // flat, persistent
  if (backward) caps.knobs["deterministic"] = {0, 1};
  return caps;
}

class AttentionEngine : public plan::Engine {
 public:
  AttentionEngine(int64_t id, const std::string& name, bool backward)
      : Engine(id, name), backward_(backward), caps_(attention_capabilities(backward)) {}
  const plan::Capabilities& capabilities() const override { return caps_; }

  void check_support(const op::Graph& graph, const plan::Facts&,
                     const DeviceProperties&) const override {
    const op::Node node = single_node(graph, name(), {backward_ ? "sdpa_bwd" : "sdpa"});
    check_node(node, name());
    const va::VarlenShape s = shape_of(node);
    if (!backward_) {
      require_output(node, "o", name());
      require(va::fwd_block_rows(s) > 0, name(),
              "no kernel in this build for " + std::string(dtype_name(s.dtype)) + " head dim " +
                  std::to_string(s.head_dim) + " (bf16/f16, 64 or 128, sm_90a builds)");
    } else {
      for (const char* p : {"dq", "dk", "dv"}) require_output(node, p, name());
      require(va::bwd_kv_block_rows(s) > 0 && va::bwd_q_block_rows(s) > 0, name(),
              "no backward kernel in this build for " + std::string(dtype_name(s.dtype)) +
                  " head dim " + std::to_string(s.head_dim));
    }
  }

  std::shared_ptr<const plan::CompiledPlan> build_plan(
      const op::Graph& graph, const plan::Facts&, const plan::PlanConfig& config,
      const plan::BuildContext& ctx) const override {
    const op::Node node = graph.nodes()[0];
    const Device device = plan_device(ctx);
    const va::VarlenShape s = shape_of(node);
    const int64_t schedule = config.knobs.at("schedule");
    const int sms = std::max(1, ctx.device.multiprocessors);
    plan::OperandRules rules;
    for (const auto& [port, t] : node.inputs()) rules.add(*ctx.layout, t, device, true);
    for (const auto& [port, t] : node.outputs())
      if (receives(t)) rules.add(*ctx.layout, t, device, true);
    auto at = [&](const op::Tensor& t) { return t.defined() ? ctx.layout->index_of(t) : -1; };
    const int cu_q = at(node.input("cu_seqlens_q")), cu_kv = at(node.input("cu_seqlens_kv"));
    if (!backward_) {
      AttentionFwdPlan::Table t{};
      t.shape = s;
      t.grid = grid_plan(s, true, va::fwd_block_rows(s), schedule, sms, cu_q, 0);
      t.q = at(node.input("q"));
      t.k = at(node.input("k"));
      t.v = at(node.input("v"));
      t.cu_kv = cu_kv;
      t.o = at(node.output("o"));
      t.stats = receives(node.output("stats")) ? at(node.output("stats")) : -1;
      return std::make_shared<AttentionFwdPlan>(std::move(rules), t);
    }
    AttentionBwdPlan::Table t{};
    t.shape = s;
    t.deterministic = config.knobs.at("deterministic") != 0;
    const std::size_t one = offsets_bytes(s);
    t.kv_grid = grid_plan(s, false, va::bwd_kv_block_rows(s), schedule, sms, cu_kv, 0);
    t.q_grid = grid_plan(s, true, va::bwd_q_block_rows(s), schedule, sms, cu_q, one);
    t.kernels_at = 2 * one;
    t.q = at(node.input("q"));
    t.k = at(node.input("k"));
    t.v = at(node.input("v"));
    t.o = at(node.input("o"));
    t.d_o = at(node.input("d_o"));
    t.stats = at(node.input("stats"));
    t.dq = at(node.output("dq"));
    t.dk = at(node.output("dk"));
    t.dv = at(node.output("dv"));
    return std::make_shared<AttentionBwdPlan>(std::move(rules), t);
  }

 private:
  bool backward_;
  plan::Capabilities caps_;
};

}  // namespace

std::unique_ptr<plan::Engine> make_attention_engine(int64_t id, const std::string& name) {
  return std::make_unique<AttentionEngine>(id, name, false);
}

std::unique_ptr<plan::Engine> make_attention_bwd_engine(int64_t id, const std::string& name) {
  return std::make_unique<AttentionEngine>(id, name, true);
}

}  // namespace eagle::native
