#include "engines/native/embedding_engine.hpp"

#include <cstring>

#include "eagle/plan/operand_rules.hpp"
#include "engines/native/embedding_bwd_kernels.hpp"
#include "engines/native/embedding_kernels.hpp"
#include "engines/native/launch_status.hpp"
#include "engines/native/structured_support.hpp"

namespace eagle::native {

namespace {

// 16 bytes of the dtype's quiet NaN, repeated.
void fill_nan(DType dtype, uint32_t (&out)[4]) {
  const uint32_t word = dtype == DType::f32   ? 0x7fc00000u
                        : dtype == DType::f16 ? 0x7e007e00u
                                              : 0x7fc07fc0u;  // bf16
  for (uint32_t& w : out) w = word;
}

class EmbeddingPlan : public plan::CompiledPlan {
 public:
  struct Table {
    int table, ids, y;
    EmbeddingArgs args[2];  // [0] 16-byte units, [1] one element per unit
    RowGeometry geo[2];
    EmbeddingLauncher launch[2];
  };
  EmbeddingPlan(plan::OperandRules rules, Table t) : rules_(std::move(rules)), t_(t) {}

  bool run(const plan::OperandBuffer* ops,
           const plan::ExecutionContext& ctx) const noexcept override {
    if (!rules_.match(ops)) return false;
    if (t_.args[1].rows == 0 || t_.args[1].units == 0) return true;
    const void* table = ops[t_.table].data;
    void* y = ops[t_.y].data;
    const int k = t_.launch[0] && aligned16(table) && aligned16(y) ? 0 : 1;
    EmbeddingArgs a = t_.args[k];
    a.table = table;
    a.ids = ops[t_.ids].data;
    a.y = y;
    return t_.launch[k](a, t_.geo[k], ctx.stream);
  }
  void explain(const plan::OperandBuffer* ops, const plan::ExecutionContext& ctx) const override {
    explain_refusal(rules_, ops, ctx, 0, "native embedding");
  }

 private:
  plan::OperandRules rules_;
  Table t_;
};

class EmbeddingBwdPlan : public plan::CompiledPlan {
 public:
  struct Table {
    int dy, ids, dtable;
    EmbeddingBwdArgs args;
    RowGeometry geo[2];  // vectorized (16-byte packs), scalar
    EmbeddingBwdLauncher launch[2];
  };
  EmbeddingBwdPlan(plan::OperandRules rules, Table t) : rules_(std::move(rules)), t_(t) {}

  std::size_t workspace_bytes() const override {
    return embedding_bwd_workspace(t_.args.vocab, t_.args.rows);
  }
  bool run(const plan::OperandBuffer* ops,
           const plan::ExecutionContext& ctx) const noexcept override {
    if (!rules_.match(ops) || ctx.workspace_bytes < workspace_bytes()) return false;
    if (t_.args.vocab == 0 || t_.args.dim == 0) return true;
    EmbeddingBwdArgs a = t_.args;
    a.dy = ops[t_.dy].data;
    a.ids = ops[t_.ids].data;
    a.dtable = ops[t_.dtable].data;
    a.scratch = static_cast<int32_t*>(ctx.workspace);
    const int k = t_.launch[0] && aligned16(a.dy) && aligned16(a.dtable) ? 0 : 1;
    return t_.launch[k](a, t_.geo[k], ctx.stream);
  }
  void explain(const plan::OperandBuffer* ops, const plan::ExecutionContext& ctx) const override {
    explain_refusal(rules_, ops, ctx, workspace_bytes(), "native embedding_bwd");
  }

 private:
  plan::OperandRules rules_;
  Table t_;
};

class EmbeddingEngine : public plan::Engine {
 public:
  EmbeddingEngine(int64_t id, const std::string& name) : Engine(id, name) {
    caps_ = native_capabilities();
  }
  const plan::Capabilities& capabilities() const override { return caps_; }

  void check_support(const op::Graph& graph, const plan::Facts&,
                     const DeviceProperties&) const override {
    const op::Node node = single_node(graph, name(), {"embedding", "embedding_bwd"});
    const bool bwd = node.op() == "embedding_bwd";
    const op::Tensor data = node.input(bwd ? "dy" : "table"), ids = node.input("ids");
    require_float_io(data.dtype(), bwd ? "dy" : "table", name());
    require(ids.dtype() == DType::i32 || ids.dtype() == DType::i64, name(),
            "ids must be i32 or i64, not " + std::string(dtype_name(ids.dtype())));
    require_output(node, bwd ? "dtable" : "y", name());
    for (const auto& [port, t] : node.inputs()) require_row_major(t, name());
    for (const auto& [port, t] : node.outputs()) require_row_major(t, name());
    // Positions are sorted as int32 (embedding_bwd_kernels.hpp).
    require(!bwd || element_count(ids.dims()) < (int64_t{1} << 31), name(),
            "the backward sorts at most 2^31 - 1 ids");
    // Its counting sort keeps a bucket's cursors in shared memory (embedding_bwd_kernels.hpp).
    require(!bwd || node.output("dtable").dims()[0] <= kEmbeddingMaxVocab, name(),
            "the backward sorts ids of at most 2^26 classes");
    if (!embedding_launcher(4, ids.dtype()))
      throw NotSupported(name() + ": no kernel in this build (no CUDA)");
  }

  std::shared_ptr<const plan::CompiledPlan> build_plan(
      const op::Graph& graph, const plan::Facts&, const plan::PlanConfig&,
      const plan::BuildContext& ctx) const override {
    const op::Node node = graph.nodes()[0];
    if (node.op() == "embedding_bwd") return build_bwd(node, ctx);
    const Device device = plan_device(ctx);
    const op::Tensor table = node.input("table"), ids = node.input("ids"), y = node.output("y");
    plan::OperandRules rules;
    for (const op::Tensor& t : {table, ids, y}) rules.add(*ctx.layout, t, device, true);
    EmbeddingPlan::Table t{};
    t.table = ctx.layout->index_of(table);
    t.ids = ctx.layout->index_of(ids);
    t.y = ctx.layout->index_of(y);
    const int elem = static_cast<int>(itemsize(table.dtype()));
    const int64_t row_bytes = table.dims()[1] * elem;
    const int64_t rows = element_count(ids.dims());
    const int sms = ctx.device.multiprocessors;
    for (int k = 0; k < 2; ++k) {
      const int unit = k == 0 ? 16 : elem;
      if (row_bytes % unit != 0) continue;
      EmbeddingArgs& a = t.args[k];
      a.rows = rows;
      a.vocab = table.dims()[0];
      a.units = row_bytes / unit;
      fill_nan(table.dtype(), a.nan);
      t.geo[k] = row_geometry(rows, a.units, 1, sms);
      t.launch[k] = embedding_launcher(unit, ids.dtype());
    }
    return std::make_shared<EmbeddingPlan>(std::move(rules), t);
  }

 private:
  static std::shared_ptr<const plan::CompiledPlan> build_bwd(const op::Node& node,
                                                             const plan::BuildContext& ctx) {
    const Device device = plan_device(ctx);
    const op::Tensor dy = node.input("dy"), ids = node.input("ids");
    const op::Tensor dtable = node.output("dtable");
    plan::OperandRules rules;
    for (const op::Tensor& t : {dy, ids, dtable}) rules.add(*ctx.layout, t, device, true);
    EmbeddingBwdPlan::Table t{};
    t.dy = ctx.layout->index_of(dy);
    t.ids = ctx.layout->index_of(ids);
    t.dtable = ctx.layout->index_of(dtable);
    EmbeddingBwdArgs& a = t.args;
    a.rows = element_count(ids.dims());
    a.vocab = dtable.dims()[0];
    a.dim = dtable.dims()[1];
    const int sms = ctx.device.multiprocessors;
    const int vec = row_vec(a.dim, static_cast<int>(itemsize(dy.dtype())));
    t.geo[1] = row_geometry(a.vocab, a.dim, 1, sms);
    t.launch[1] = embedding_bwd_launcher(dy.dtype(), ids.dtype(), t.geo[1]);
    if (vec > 1) {
      t.geo[0] = row_geometry(a.vocab, a.dim, vec, sms);
      t.launch[0] = embedding_bwd_launcher(dy.dtype(), ids.dtype(), t.geo[0]);
    }
    return std::make_shared<EmbeddingBwdPlan>(std::move(rules), t);
  }

  plan::Capabilities caps_;
};

}  // namespace

std::unique_ptr<plan::Engine> make_embedding_engine(int64_t id, const std::string& name) {
  return std::make_unique<EmbeddingEngine>(id, name);
}

}  // namespace eagle::native
