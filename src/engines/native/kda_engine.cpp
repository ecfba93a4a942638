#include "engines/native/kda_engine.hpp"

#include <string>

#include "eagle/plan/operand_rules.hpp"
#include "eagle/ragged/capacity.hpp"
#include "engines/native/attention/varlen_kernels.hpp"
#include "engines/native/kda_node.hpp"
#include "engines/native/launch_status.hpp"
#include "engines/native/linear_attention/kda_kernels.hpp"
#include "engines/native/structured_support.hpp"

namespace eagle::native {

namespace {

// Declines what the kernels do not serve; the node is a single kda or gdn2.
void check_node(const op::Node& node, const std::string& engine) {
  require_linear_attention_operands(node, engine, {"k", "v"});
  require_f32_gates(node, engine);
  const op::Tensor h0 = node.input("initial_state");
  require(!h0.defined() || h0.dtype() == DType::f32, engine,
          "initial_state must be f32 (the final state takes its dtype), not " + dtype_text(h0));
  require(node.input("cu_seqlens").dims()[0] >= 2, engine, "needs at least one sequence slot");
}

class KdaPlan : public plan::CompiledPlan {
 public:
  struct Table {
    kda::Shape shape;
    int64_t capacity = 0;                       // ragged::chunk_capacity(T, N, 64)
    int q, k, v, g, beta, b, w, cu, h0, o, ht;  // positions (-1: not wired / not received)
  };
  KdaPlan(plan::OperandRules rules, Table t) : rules_(std::move(rules)), t_(t) {}

  std::size_t offsets_bytes() const {
    return round_up_region(static_cast<std::size_t>(t_.shape.slots + 1) * sizeof(int32_t));
  }
  std::size_t workspace_bytes() const override {
    return offsets_bytes() + kda::workspace_bytes(t_.shape, t_.capacity);
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
    kda::FwdArgs a;
    a.shape = t_.shape;
    a.shape.cu = cu;
    a.q = ptr(t_.q);
    a.k = ptr(t_.k);
    a.v = ptr(t_.v);
    a.g = static_cast<const float*>(ptr(t_.g));
    a.beta = static_cast<const float*>(ptr(t_.beta));
    a.b = static_cast<const float*>(ptr(t_.b));
    a.w = static_cast<const float*>(ptr(t_.w));
    a.initial_state = static_cast<const float*>(ptr(t_.h0));
    a.o = ptr(t_.o);
    a.final_state = static_cast<float*>(ptr(t_.ht));
    a.chunk_offsets = offsets;
    a.capacity_chunks = t_.capacity;
    if (!kda::forward(a, static_cast<char*>(ctx.workspace) + offsets_bytes(), ctx.stream))
      return launch_succeeded(), false;
    return true;
  }
  void explain(const plan::OperandBuffer* ops, const plan::ExecutionContext& ctx) const override {
    explain_refusal(rules_, ops, ctx, workspace_bytes(), "native kda/gdn2");
  }

 private:
  plan::OperandRules rules_;
  Table t_;
};

plan::Capabilities kda_capabilities() {
  plan::Capabilities caps;
  caps.device = DeviceKind::cuda;
  caps.sm_lo = caps.sm_hi = 90;  // built for sm_90a only
  // The io dtype the facts name is the graph's first float input; the gates are f32, so the
  // precise per-port rule is check_node's.
  caps.dtypes = {DType::bf16, DType::f16, DType::f32};
  // 0 flat (a CTA per task of the capacity), 1 persistent (resident CTAs looping over tasks),
  // 2 persistent for the state launch only, 3 for the chunk launches (prepare, output) only: the
  // schedule measured per stage.
  caps.knobs["schedule"] = {0, 1, 2, 3};
  // The intra-chunk diagonal blocks: 1 on the tensor cores where the decay allows, 0 exactly.
  caps.knobs["intra"] = {1, 0};
  // The state launch: 1 prefetches the next chunk's slab with cp.async (double-buffered), 0
  // loads each chunk's before computing it. 1 leads: measured on the H200 (bench 14a, bf16,
  // H 32, K = V = 128, 2026-12-05) 9.15 / 9.63 / 1.37 ms at T 32768 N 8, T 32768 N 64,
  // T 4096 N 32 against 10.12 / 10.49 / 1.48 ms for 0.
  caps.knobs["pipeline"] = {1, 0};
  // The prepare launch: 0 the wide layout (f32 rows, one CTA per SM), 1 the compact one (16-bit
  // rows, cp.async, two kda CTAs per SM; the wide one where an operand is not 16-byte aligned).
  // 1 leads: measured on the H200 (bench 14a, bf16, H 32, K = V = 128, 2026-12-05) 5.66 / 5.92 /
  // 0.86 ms at T 32768 N 8, T 32768 N 64, T 4096 N 32 against 8.38 / 8.87 / 1.26 ms for 0.
  // 2: the compact layout with the intra-chunk products' fragments built in registers by each
  // warp (kda::Shape::fragment_products: no staging, no barrier per 32 keys). 2 leads: measured
  // on an H100 (kda forward, bf16, H 32, K = V = 128, T 32768 N 8, state 2, 2026-12-06)
  // 2.767 ms against 3.020 for 1 (equal lengths), 3.104 against 3.305 (skewed).
  caps.knobs["prepare"] = {2, 1, 0};
  // The compact prepare's W and U stores (and the output's o stores): 0 from the mma fragments,
  // 1 staged through shared memory in 16-byte pieces (kda::Shape::staged_stores). 1 leads: measured
  // on an H100 (bench 14a, as above, 2026-12-06) 5.68 / 5.96 / 0.883 ms against 5.85 / 6.15 / 0.908
  // ms for 0.
  caps.knobs["stores"] = {1, 0};
  // The state launch: 0 one CTA per 32 columns (each reading W and kg from L2 itself: ncu on an
  // H100 found that launch at 72% of L2 throughput, 2026-12-06), 1 one CTA per head (its four
  // 32-column groups of warps sharing the chunk's W and kg rows, one CTA of 16 warps per SM),
  // 2 the state transposed in registers, each warp's 16 value columns a recurrence of their own
  // (kda_state_rows.cuh), one barrier per chunk instead of three. 2 leads: measured on an H100
  // (bench 14a, bf16, H 32, K = V = 128, 2026-12-06) 4.66 / 4.59 / 0.693 ms at T 32768 N 8,
  // T 32768 N 64, T 4096 N 32 against 5.17 / 5.41 / 0.801 ms for 0 and 5.48 / 5.68 / 0.857 for 1.
  // 3: 2 with two CTAs per (sequence, head), the sequences past a balanced share split over
  // both: 2.863 / 2.963 / 0.464 ms against 2's 3.160 / 3.003 / 0.458 (H100, 2026-12-07, before
  // the split's 1.25x margin). With the margin 3 leads: 2.826 / 2.947 / 0.455 ms against 2's
  // 3.123 / 2.948 / 0.453 (H100, 2026-12-07, session 23).
  caps.knobs["state"] = {3, 2, 0, 1};
  return caps;
}

class KdaEngine : public plan::Engine {
 public:
  KdaEngine(int64_t id, const std::string& name) : Engine(id, name), caps_(kda_capabilities()) {}
  const plan::Capabilities& capabilities() const override { return caps_; }

  void check_support(const op::Graph& graph, const plan::Facts&,
                     const DeviceProperties&) const override {
    const op::Node node = single_node(graph, name(), {"kda", "gdn2"});
    check_node(node, name());
    require_output(node, "o", name());
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
      return receives(t) ? ctx.layout->index_of(t) : -1;
    };
    KdaPlan::Table t{};
    t.shape = kda_shape_of(node);
    t.shape.tensor_core_diagonal = config.knobs.at("intra") != 0;
    t.shape.pipelined_state = config.knobs.at("pipeline") != 0;
    t.shape.head_state = config.knobs.at("state") == 1;
    t.shape.state_rows = config.knobs.at("state") >= 2;
    t.shape.split_state_rows = config.knobs.at("state") == 3;
    const int64_t schedule = config.knobs.at("schedule");
    t.shape.persistent = schedule == 1 || schedule == 3;
    t.shape.persistent_state = schedule == 1 || schedule == 2;
    t.shape.compact_prepare = config.knobs.at("prepare") != 0;
    t.shape.fragment_products = config.knobs.at("prepare") == 2;
    t.shape.staged_stores = config.knobs.at("stores") != 0;
    t.capacity = ragged::chunk_capacity(t.shape.rows, t.shape.slots, kda::kChunk);
    t.q = in("q");
    t.k = in("k");
    t.v = in("v");
    t.g = in("g");
    const bool gdn2 = node.op() == "gdn2";
    t.beta = gdn2 ? -1 : in("beta");
    t.b = gdn2 ? in("b") : -1;
    t.w = gdn2 ? in("w") : -1;
    t.cu = in("cu_seqlens");
    t.h0 = in("initial_state");
    t.o = out("o");
    t.ht = out("final_state");
    return std::make_shared<KdaPlan>(std::move(rules), t);
  }

 private:
  plan::Capabilities caps_;
};

}  // namespace

std::unique_ptr<plan::Engine> make_kda_engine(int64_t id, const std::string& name) {
  return std::make_unique<KdaEngine>(id, name);
}

}  // namespace eagle::native
