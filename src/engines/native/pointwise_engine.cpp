#include "engines/native/pointwise_engine.hpp"

#include <algorithm>

#include "eagle/core/error.hpp"
#include "eagle/plan/operand_rules.hpp"
#include "engines/analyzers.hpp"
#include "engines/native/pointwise_kernels.hpp"
#include "engines/native/structured_support.hpp"

namespace eagle::native {

bool pointwise_op_of(std::string_view name, PwOp& op) {
#define EAGLE_PW_NAME(op_name, binary) \
  if (name == #op_name) {              \
    op = PwOp::op_name;                \
    return true;                       \
  }
  EAGLE_POINTWISE_OPS(EAGLE_PW_NAME)
#undef EAGLE_PW_NAME
  return false;
}

namespace {

// Everything the call needs, fixed at build: positions, the kernel, the grid. run() reads it
// in one pass and launches.
class PointwisePlan : public plan::CompiledPlan {
 public:
  // The scalar kernel and its grid; the vector kernel (nullptr where n does not split into its
  // vectors) and its grid, taken by a call whose pointers are all 16-byte aligned.
  struct Launch {
    const void* kernel;
    unsigned grid;
  };
  PointwisePlan(plan::OperandRules rules, int a, int b, int out, Launch scalar, Launch vector,
                int64_t n, unsigned block)
      : rules_(std::move(rules)),
        a_(a),
        b_(b),
        out_(out),
        scalar_(scalar),
        vector_(vector),
        n_(n),
        block_(block) {}

  bool run(const plan::OperandBuffer* ops,
           const plan::ExecutionContext& ctx) const noexcept override {
    if (!rules_.match(ops)) return false;
    const void* a = ops[a_].data;
    const void* b = b_ >= 0 ? ops[b_].data : nullptr;
    void* out = ops[out_].data;
    const bool vector = vector_.kernel && aligned16(a) && (!b || aligned16(b)) && aligned16(out);
    const Launch& l = vector ? vector_ : scalar_;
    return launch_pointwise(l.kernel, a, b, out, n_, l.grid, block_, ctx.stream);
  }

  void explain(const plan::OperandBuffer* ops, const plan::ExecutionContext&) const override {
    rules_.explain(ops);
    throw CudaError(std::string("native pointwise: launch failed: ") + last_launch_error());
  }

 private:
  plan::OperandRules rules_;
  int a_, b_, out_;
  Launch scalar_, vector_;
  int64_t n_;
  unsigned block_;
};

class PointwiseEngine : public plan::Engine {
 public:
  PointwiseEngine(int64_t id, const std::string& name) : Engine(id, name) {
    caps_ = native_capabilities();
    caps_.knobs["block"] = {256, 128, 512};
  }
  const plan::Capabilities& capabilities() const override { return caps_; }

  void check_support(const op::Graph& graph, const plan::Facts& facts,
                     const DeviceProperties&) const override {
    const auto* f = dynamic_cast<const engines::PointwiseFacts*>(&facts);
    PwOp op;
    if (!f || !f->single_node) throw NotSupported(name() + ": serves one pointwise node");
    if (graph.nodes()[0].output("out").is_virtual())
      throw NotSupported(name() + ": the output is virtual (set_output(true) to receive it)");
    if (!pointwise_op_of(f->op, op)) throw NotSupported(name() + ": no kernel for op " + f->op);
    if (f->arity != (is_binary(op) ? 2 : 1) || !f->same_dims)
      throw NotSupported(name() + ": operands must share the output's dims (no broadcasting)");
    if (!f->uniform_dtype) throw NotSupported(name() + ": operands must share one dtype");
    // The facts' io dtype is the first floating input's (f32 when there is none): read the
    // node's own dtype, so an integer or boolean graph is declined, not run as f32.
    const DType d = graph.nodes()[0].output("out").dtype();
    if (d != f->io_dtype ||
        std::find(caps_.dtypes.begin(), caps_.dtypes.end(), d) == caps_.dtypes.end())
      throw NotSupported(name() + ": serves f32, f16 and bf16 operands, not " +
                         std::string(dtype_name(d)));
    if (!f->row_major) throw NotSupported(name() + ": operands must be dense row-major");
    if (!pointwise_kernel(op, f->io_dtype))
      throw NotSupported(name() + ": no kernel for " + f->op + " in " +
                         std::string(dtype_name(f->io_dtype)) + " in this build");
  }

  std::shared_ptr<const plan::CompiledPlan> build_plan(
      const op::Graph& graph, const plan::Facts& facts, const plan::PlanConfig& config,
      const plan::BuildContext& ctx) const override {
    const auto& f = dynamic_cast<const engines::PointwiseFacts&>(facts);
    PwOp op;
    pointwise_op_of(f.op, op);
    const op::Node node = graph.nodes()[0];
    const Device device = ctx.target.value_or(Device::parse(ctx.device.device));
    plan::OperandRules rules;
    const op::Tensor a = node.input("a"), b = node.input("b"), out = node.output("out");
    for (const op::Tensor& t : {a, b, out})
      if (t.defined()) rules.add(*ctx.layout, t, device, /*row_major=*/true);
    const auto block = static_cast<unsigned>(config.knobs.at("block"));
    // A thread per item (element or vector), at most 32 blocks per SM (then grid-stride).
    const auto grid_for = [&](int64_t items) {
      const int64_t blocks = std::max<int64_t>(1, (items + block - 1) / block);
      return static_cast<unsigned>(
          std::min<int64_t>(blocks, std::max(1, ctx.device.multiprocessors) * 32));
    };
    const int64_t per_vector = kPointwiseVectorBytes / static_cast<int64_t>(itemsize(f.io_dtype));
    const PointwisePlan::Launch scalar{pointwise_kernel(op, f.io_dtype), grid_for(f.numel)};
    PointwisePlan::Launch vector{nullptr, 0};
    if (f.numel % per_vector == 0)
      vector = {pointwise_kernel(op, f.io_dtype, true), grid_for(f.numel / per_vector)};
    return std::make_shared<PointwisePlan>(
        std::move(rules), ctx.layout->index_of(a), b.defined() ? ctx.layout->index_of(b) : -1,
        ctx.layout->index_of(out), scalar, vector, f.numel, block);
  }

 private:
  plan::Capabilities caps_;
};

}  // namespace

std::unique_ptr<plan::Engine> make_pointwise_engine(int64_t id, const std::string& name) {
  return std::make_unique<PointwiseEngine>(id, name);
}

}  // namespace eagle::native
