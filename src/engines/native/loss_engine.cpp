#include "engines/native/loss_engine.hpp"

#include <algorithm>

#include "eagle/plan/operand_rules.hpp"
#include "engines/native/launch_status.hpp"
#include "engines/native/loss_kernels.hpp"
#include "engines/native/structured_support.hpp"

namespace eagle::native {

namespace {

// The chunk of a split backward row: classes per group of threads.
constexpr int64_t kSplitChunk = 4096;

class CrossEntropyPlan : public plan::CompiledPlan {
 public:
  struct Table {
    int logits, targets, loss, lse;  // positions (lse -1: not received)
    DType targets_dtype;
    bool reduce, mean;
    CrossEntropyArgs args;
    RowGeometry geo[2];  // vectorized (16-byte packs), scalar
    CrossEntropyLauncher launch[2];
  };
  CrossEntropyPlan(plan::OperandRules rules, Table t) : rules_(std::move(rules)), t_(t) {}

  // Per-row losses to reduce (floats, rounded up to 8 bytes), then split rows' partials.
  std::size_t loss_bytes() const {
    return t_.reduce ? (static_cast<std::size_t>(t_.args.rows) * sizeof(float) + 7) / 8 * 8 : 0;
  }
  std::size_t workspace_bytes() const override {
    const int64_t partials = t_.args.splits > 1 ? t_.args.rows * t_.args.splits * 3 : 0;
    return loss_bytes() + static_cast<std::size_t>(partials) * sizeof(double);
  }

  bool run(const plan::OperandBuffer* ops,
           const plan::ExecutionContext& ctx) const noexcept override {
    if (!rules_.match(ops)) return false;
    if (ctx.workspace_bytes < workspace_bytes()) return false;
    CrossEntropyArgs a = t_.args;
    a.logits = ops[t_.logits].data;
    a.targets = ops[t_.targets].data;
    a.lse = t_.lse >= 0 ? static_cast<float*>(ops[t_.lse].data) : nullptr;
    a.row_loss = static_cast<float*>(t_.reduce ? ctx.workspace : ops[t_.loss].data);
    a.partials = reinterpret_cast<double*>(static_cast<char*>(ctx.workspace) + loss_bytes());
    float* loss = static_cast<float*>(ops[t_.loss].data);
    if (a.rows > 0) {
      const int k = t_.launch[0] && aligned16(a.logits) ? 0 : 1;
      if (!t_.launch[k](a, t_.geo[k], ctx.stream)) return false;
    }
    if (!t_.reduce) return true;
    return launch_loss_total(a.row_loss, a.targets, t_.targets_dtype, a.rows, a.ignore_index,
                             t_.mean, loss, ctx.stream);
  }
  void explain(const plan::OperandBuffer* ops, const plan::ExecutionContext& ctx) const override {
    explain_refusal(rules_, ops, ctx, workspace_bytes(), "native cross_entropy");
  }

 private:
  plan::OperandRules rules_;
  Table t_;
};

class CrossEntropyBwdPlan : public plan::CompiledPlan {
 public:
  struct Table {
    int logits, targets, dloss, lse, dlogits;  // positions (lse -1: not wired)
    CrossEntropyBwdArgs args;
    RowGeometry geo[2];  // vectorized (16-byte packs), scalar
    CrossEntropyBwdLauncher launch[2];
  };
  CrossEntropyBwdPlan(plan::OperandRules rules, Table t) : rules_(std::move(rules)), t_(t) {}

  std::size_t workspace_bytes() const override {
    return t_.args.reduction == 2 ? sizeof(int64_t) : 0;
  }
  bool run(const plan::OperandBuffer* ops,
           const plan::ExecutionContext& ctx) const noexcept override {
    if (!rules_.match(ops) || ctx.workspace_bytes < workspace_bytes()) return false;
    if (t_.args.rows == 0) return true;
    CrossEntropyBwdArgs a = t_.args;
    a.logits = ops[t_.logits].data;
    a.targets = ops[t_.targets].data;
    a.dloss = static_cast<const float*>(ops[t_.dloss].data);
    a.lse = t_.lse >= 0 ? static_cast<const float*>(ops[t_.lse].data) : nullptr;
    a.dlogits = ops[t_.dlogits].data;
    a.counted = static_cast<int64_t*>(ctx.workspace);
    const int k = t_.launch[0] && aligned16(a.logits) && aligned16(a.dlogits) ? 0 : 1;
    return t_.launch[k](a, t_.geo[k], ctx.stream);
  }
  void explain(const plan::OperandBuffer* ops, const plan::ExecutionContext& ctx) const override {
    explain_refusal(rules_, ops, ctx, workspace_bytes(), "native cross_entropy_bwd");
  }

 private:
  plan::OperandRules rules_;
  Table t_;
};

// count_not_equal: one block over x.
class CountPlan : public plan::CompiledPlan {
 public:
  struct Table {
    int x, y;  // positions
    DType x_dtype, y_dtype;
    int64_t n, value;
  };
  CountPlan(plan::OperandRules rules, Table t) : rules_(std::move(rules)), t_(t) {}
  bool run(const plan::OperandBuffer* ops,
           const plan::ExecutionContext& ctx) const noexcept override {
    if (!rules_.match(ops)) return false;
    return launch_count_not_equal(ops[t_.x].data, t_.x_dtype, t_.n, t_.value, ops[t_.y].data,
                                  t_.y_dtype, ctx.stream);
  }
  void explain(const plan::OperandBuffer* ops, const plan::ExecutionContext& ctx) const override {
    explain_refusal(rules_, ops, ctx, 0, "native count_not_equal");
  }

 private:
  plan::OperandRules rules_;
  Table t_;
};

class LossEngine : public plan::Engine {
 public:
  LossEngine(int64_t id, const std::string& name) : Engine(id, name) {
    caps_ = native_capabilities();
  }
  const plan::Capabilities& capabilities() const override { return caps_; }

  void check_support(const op::Graph& graph, const plan::Facts&,
                     const DeviceProperties&) const override {
    const op::Node node =
        single_node(graph, name(), {"cross_entropy", "cross_entropy_bwd", "count_not_equal"});
    if (node.op() == "count_not_equal") {
      const op::Tensor x = node.input("x");
      require(x.dtype() == DType::i32 || x.dtype() == DType::i64, name(),
              "x must be i32 or i64, not " + std::string(dtype_name(x.dtype())));
      require_row_major(x, name());
      if (!cross_entropy_launcher(DType::f32, DType::i32, row_geometry(1, 1, 1, 1)))
        throw NotSupported(name() + ": no kernel in this build (no CUDA)");
      return;
    }
    const bool bwd = node.op() == "cross_entropy_bwd";
    const op::Tensor logits = node.input("logits"), targets = node.input("targets");
    require_float_io(logits.dtype(), "logits", name());
    require(targets.dtype() == DType::i32 || targets.dtype() == DType::i64, name(),
            "targets must be i32 or i64, not " + std::string(dtype_name(targets.dtype())));
    for (const char* port : {"dloss", "lse"}) {
      const op::Tensor t = node.input(port);
      require(!t.defined() || t.dtype() == DType::f32, name(),
              std::string(port) + " must be f32 (as the forward writes it), not " +
                  (t.defined() ? std::string(dtype_name(t.dtype())) : ""));
    }
    require_output(node, bwd ? "dlogits" : "loss", name());
    for (const auto& [port, t] : node.inputs()) require_row_major(t, name());
    for (const auto& [port, t] : node.outputs()) require_row_major(t, name());
    if (!cross_entropy_launcher(logits.dtype(), targets.dtype(), row_geometry(1, 1, 1, 1)))
      throw NotSupported(name() + ": no kernel in this build (no CUDA)");
  }

  std::shared_ptr<const plan::CompiledPlan> build_plan(
      const op::Graph& graph, const plan::Facts&, const plan::PlanConfig&,
      const plan::BuildContext& ctx) const override {
    const op::Node node = graph.nodes()[0];
    const Device device = plan_device(ctx);
    if (node.op() == "cross_entropy_bwd") return build_bwd(node, ctx);
    if (node.op() == "count_not_equal") return build_count(node, ctx);
    const op::Tensor logits = node.input("logits"), targets = node.input("targets");
    const op::Tensor loss = node.output("loss"), lse = node.output("lse");
    plan::OperandRules rules;
    for (const op::Tensor& t : {logits, targets, loss, lse})
      if (receives(t)) rules.add(*ctx.layout, t, device, /*row_major=*/true);
    const std::string reduction = node.attr("reduction").as_text("reduction");
    CrossEntropyPlan::Table t{};
    t.logits = ctx.layout->index_of(logits);
    t.targets = ctx.layout->index_of(targets);
    t.loss = ctx.layout->index_of(loss);
    t.lse = receives(lse) ? ctx.layout->index_of(lse) : -1;
    t.targets_dtype = targets.dtype();
    t.reduce = reduction != "none";
    t.mean = reduction == "mean";
    t.args.rows = logits.dims()[0];
    t.args.classes = logits.dims()[1];
    t.args.ignore_index = node.attr("ignore_index").as_int("ignore_index");
    t.args.label_smoothing =
        static_cast<float>(node.attr("label_smoothing").as_real("label_smoothing"));
    const int sms = std::max(1, ctx.device.multiprocessors);
    const int vec = row_vec(t.args.classes, static_cast<int>(itemsize(logits.dtype())));
    // A warp per row, or per chunk of a row when the rows are too few to fill the device. The
    // vector width is the row's (a chunk's start is then aligned too).
    for (int k = vec > 1 ? 0 : 1; k < 2; ++k) {
      t.geo[k] = cross_entropy_geometry(t.args, k == 0 ? vec : 1, sms);
      t.launch[k] = t.args.splits > 1
                        ? split_cross_entropy_launcher(logits.dtype(), targets.dtype(), t.geo[k])
                        : cross_entropy_launcher(logits.dtype(), targets.dtype(), t.geo[k]);
    }
    return std::make_shared<CrossEntropyPlan>(std::move(rules), t);
  }

 private:
  static std::shared_ptr<const plan::CompiledPlan> build_count(const op::Node& node,
                                                               const plan::BuildContext& ctx) {
    const op::Tensor x = node.input("x"), y = node.output("y");
    plan::OperandRules rules;
    for (const op::Tensor& t : {x, y}) rules.add(*ctx.layout, t, plan_device(ctx), true);
    CountPlan::Table t{ctx.layout->index_of(x),
                       ctx.layout->index_of(y),
                       x.dtype(),
                       y.dtype(),
                       checked_numel(x.dims(), "count_not_equal"),
                       node.attr("value").as_int("value")};
    return std::make_shared<CountPlan>(std::move(rules), t);
  }

  static std::shared_ptr<const plan::CompiledPlan> build_bwd(const op::Node& node,
                                                             const plan::BuildContext& ctx) {
    const Device device = plan_device(ctx);
    const op::Tensor logits = node.input("logits"), targets = node.input("targets");
    const op::Tensor dloss = node.input("dloss"), lse = node.input("lse");
    const op::Tensor dlogits = node.output("dlogits");
    plan::OperandRules rules;
    for (const op::Tensor& t : {logits, targets, dloss, lse, dlogits})
      if (receives(t)) rules.add(*ctx.layout, t, device, /*row_major=*/true);
    const std::string reduction = node.attr("reduction").as_text("reduction");
    CrossEntropyBwdPlan::Table t{};
    t.logits = ctx.layout->index_of(logits);
    t.targets = ctx.layout->index_of(targets);
    t.dloss = ctx.layout->index_of(dloss);
    t.lse = lse.defined() ? ctx.layout->index_of(lse) : -1;
    t.dlogits = ctx.layout->index_of(dlogits);
    CrossEntropyBwdArgs& a = t.args;
    a.rows = logits.dims()[0];
    a.classes = logits.dims()[1];
    a.ignore_index = node.attr("ignore_index").as_int("ignore_index");
    a.label_smoothing = static_cast<float>(node.attr("label_smoothing").as_real("label_smoothing"));
    a.reduction = reduction == "none" ? 0 : reduction == "sum" ? 1 : 2;
    const int sms = std::max(1, ctx.device.multiprocessors);
    const int vec = row_vec(a.classes, static_cast<int>(itemsize(logits.dtype())));
    // With the forward's lse each chunk of a row is independent: few long rows go as chunks,
    // a block each (the forward's rule). Untimed default.
    const int64_t wave = int64_t{sms} * 4;
    if (lse.defined() && a.rows > 0 && a.rows < wave / 2 && a.classes >= 4 * kSplitChunk) {
      a.splits =
          std::min((a.classes + kSplitChunk - 1) / kSplitChunk, (wave + a.rows - 1) / a.rows);
      a.chunk = ((a.classes + a.splits - 1) / a.splits + 15) / 16 * 16;
      a.splits = (a.classes + a.chunk - 1) / a.chunk;
    }
    const int64_t pieces = a.rows * a.splits, len = a.splits > 1 ? a.chunk : a.classes;
    for (int k = vec > 1 ? 0 : 1; k < 2; ++k) {
      t.geo[k] = row_geometry(pieces, len, k == 0 ? vec : 1, sms);
      t.launch[k] = cross_entropy_bwd_launcher(logits.dtype(), targets.dtype(), t.geo[k]);
    }
    return std::make_shared<CrossEntropyBwdPlan>(std::move(rules), t);
  }

  plan::Capabilities caps_;
};

}  // namespace

std::unique_ptr<plan::Engine> make_loss_engine(int64_t id, const std::string& name) {
  return std::make_unique<LossEngine>(id, name);
}

}  // namespace eagle::native
