#include "engines/native/structured_support.hpp"

#include <algorithm>

#include "engines/native/launch_status.hpp"

namespace eagle::native {

op::Node single_node(const op::Graph& graph, const std::string& engine,
                     std::initializer_list<const char*> ops) {
  const auto nodes = graph.nodes();
  require(nodes.size() == 1, engine,
          "serves a single node, the graph has " + std::to_string(nodes.size()));
  std::string names;
  for (const char* op : ops) {
    if (nodes[0].op() == op) return nodes[0];
    names += std::string(names.empty() ? "" : ", ") + op;
  }
  throw NotSupported(engine + ": serves " + names + ", not " + nodes[0].op());
}

void require_row_major(const op::Tensor& t, const std::string& engine) {
  int64_t expect = 1;
  const op::Dims& dims = t.dims();
  // No element is addressed through an empty tensor's strides (the op graph gives a size-0 dim
  // the strides of size 1): it is dense whatever they are.
  if (std::find(dims.begin(), dims.end(), 0) != dims.end()) return;
  for (std::size_t i = dims.size(); i-- > 0;) {
    require(dims[i] == 1 || t.strides()[i] == expect, engine,
            "tensor '" + t.name() + "' must be dense row-major");
    expect *= dims[i];
  }
}

void require_output(const op::Node& node, const char* port, const std::string& engine) {
  require(receives(node.output(port)), engine,
          std::string("the output '") + port + "' is virtual (set_output(true) to receive it)");
}

void require_float_io(DType d, const std::string& what, const std::string& engine) {
  require(d == DType::f32 || d == DType::f16 || d == DType::bf16, engine,
          what + " must be f32, f16 or bf16, not " + std::string(dtype_name(d)));
}

std::string dtype_text(const op::Tensor& t) {
  return t.defined() ? std::string(dtype_name(t.dtype())) : std::string();
}

void require_linear_attention_operands(const op::Node& node, const std::string& engine,
                                       std::initializer_list<const char*> same_as_q) {
  const op::Tensor q = node.input("q"), cu = node.input("cu_seqlens");
  require(cu.dtype() == DType::i32, engine, "cu_seqlens must be i32, not " + dtype_text(cu));
  require(q.dtype() == DType::bf16 || q.dtype() == DType::f16, engine,
          "q must be bf16 or f16, not " + dtype_text(q));
  for (const char* p : same_as_q)
    require(node.input(p).dtype() == q.dtype(), engine,
            std::string(p) + " must have q's dtype " + dtype_text(q) + ", not " +
                dtype_text(node.input(p)));
  for (const auto& [port, t] : node.inputs()) {
    require(!t.ragged_offset().defined(), engine,
            "tensor '" + t.name() + "' has a ragged offset (sequences apart): not served");
    require_row_major(t, engine);
  }
  for (const auto& [port, t] : node.outputs()) require_row_major(t, engine);
  const int64_t k = q.dims()[2], v = node.input("v").dims()[2];
  require(k == v && (k == 64 || k == 128), engine,
          "serves K = V in {64, 128}, got K = " + std::to_string(k) + ", V = " + std::to_string(v));
}

bool receives(const op::Tensor& t) {
  return t.defined() && !t.is_virtual();
}

int64_t element_count(const op::Dims& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

Device plan_device(const plan::BuildContext& ctx) {
  return ctx.target.value_or(Device::parse(ctx.device.device));
}

void explain_refusal(const plan::OperandRules& rules, const plan::OperandBuffer* ops,
                     const plan::ExecutionContext& ctx, std::size_t needed,
                     const std::string& what) {
  rules.explain(ops);
  if (ctx.workspace_bytes < needed)
    throw InvalidArgument(what + ": needs " + std::to_string(needed) +
                          " bytes of workspace, the call passed " +
                          std::to_string(ctx.workspace_bytes));
  throw CudaError(what + ": launch failed: " + structured_launch_error());
}

}  // namespace eagle::native
