#include "engines/native/embedding_engine.hpp"

#include <cstring>

#include "eagle/plan/operand_rules.hpp"
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
  void explain(const plan::OperandBuffer* ops, const plan::ExecutionContext&) const override {
    rules_.explain(ops);
    throw CudaError(std::string("native embedding: launch failed: ") + structured_launch_error());
  }

 private:
  plan::OperandRules rules_;
  Table t_;
};

class EmbeddingEngine : public plan::Engine {
 public:
  EmbeddingEngine(int64_t id, const std::string& name) : Engine(id, name) {
    caps_.device = DeviceKind::cuda;
    caps_.sm_lo = 80;  // plain CUDA C++, built for Ampere and Hopper (EAGLE_CUDA_ARCHITECTURES)
    caps_.sm_hi = 1299;
    caps_.dtypes = {DType::f32, DType::f16, DType::bf16};
  }
  const plan::Capabilities& capabilities() const override { return caps_; }

  void check_support(const op::Graph& graph, const plan::Facts&,
                     const DeviceProperties&) const override {
    const op::Node node = single_node(graph, name(), {"embedding"});
    const op::Tensor table = node.input("table"), ids = node.input("ids");
    require_float_io(table.dtype(), "table", name());
    require(ids.dtype() == DType::i32 || ids.dtype() == DType::i64, name(),
            "ids must be i32 or i64, not " + std::string(dtype_name(ids.dtype())));
    require_output(node, "y", name());
    for (const op::Tensor& t : {table, ids, node.output("y")}) require_row_major(t, name());
    if (!embedding_launcher(4, ids.dtype()))
      throw NotSupported(name() + ": no kernel in this build (no CUDA)");
  }

  std::shared_ptr<const plan::CompiledPlan> build_plan(
      const op::Graph& graph, const plan::Facts&, const plan::PlanConfig&,
      const plan::BuildContext& ctx) const override {
    const op::Node node = graph.nodes()[0];
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
  plan::Capabilities caps_;
};

}  // namespace

std::unique_ptr<plan::Engine> make_embedding_engine(int64_t id, const std::string& name) {
  return std::make_unique<EmbeddingEngine>(id, name);
}

}  // namespace eagle::native
