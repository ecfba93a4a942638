#include "engines/native/fused_engine.hpp"

#include <algorithm>
#include <map>
#include <vector>

#include "eagle/plan/operand_rules.hpp"
#include "engines/native/fused_kernels.hpp"
#include "engines/native/launch_status.hpp"
#include "engines/native/structured_support.hpp"

namespace eagle::native {

namespace {

// The broadcast of every tensor's dims (the IR checked that they broadcast).
op::Dims iteration_shape(const op::Graph& graph) {
  op::Dims shape;
  for (const op::Tensor& t : graph.tensors()) {
    const op::Dims& d = t.dims();
    if (d.size() > shape.size()) shape.insert(shape.begin(), d.size() - shape.size(), 1);
    for (std::size_t i = 0; i < d.size(); ++i) {
      int64_t& s = shape[shape.size() - d.size() + i];
      if (s == 1) s = d[i];
    }
  }
  return shape;
}

class FusedPlan : public plan::CompiledPlan {
 public:
  FusedPlan(plan::OperandRules rules, std::vector<int> in_pos, std::vector<int> out_pos,
            FusedProgram program, FusedLauncher launch, int multiprocessors)
      : rules_(std::move(rules)),
        in_pos_(std::move(in_pos)),
        out_pos_(std::move(out_pos)),
        program_(program),
        launch_(launch),
        multiprocessors_(multiprocessors),
        vector_shape_(fused_vector_shape(program_)) {}

  bool run(const plan::OperandBuffer* ops,
           const plan::ExecutionContext& ctx) const noexcept override {
    if (!rules_.match(ops)) return false;
    if (program_.numel == 0) return true;
    FusedProgram p = program_;
    for (std::size_t k = 0; k < in_pos_.size(); ++k) p.in[k] = ops[in_pos_[k]].data;
    for (std::size_t k = 0; k < out_pos_.size(); ++k) p.out[k] = ops[out_pos_[k]].data;
    return launch_(p, vector_shape_ && vector_pointers(p), multiprocessors_, ctx.stream);
  }
  void explain(const plan::OperandBuffer* ops, const plan::ExecutionContext& ctx) const override {
    explain_refusal(rules_, ops, ctx, 0, "native fused pointwise");
  }

 private:
  plan::OperandRules rules_;
  std::vector<int> in_pos_, out_pos_;
  FusedProgram program_;
  FusedLauncher launch_;
  int multiprocessors_;
  bool vector_shape_;  // fused_vector_shape(program_)

  // The vector path reads non-splat inputs and writes every output 16 bytes at a time.
  static bool vector_pointers(const FusedProgram& p) noexcept {
    for (int k = 0; k < p.inputs; ++k)
      if (!p.in_splat[k] && !aligned16(p.in[k])) return false;
    for (int k = 0; k < p.outputs; ++k)
      if (!aligned16(p.out[k])) return false;
    return true;
  }
};

// An input declared as one element repeated (every stride 0, e.g. a derivative's constant in a
// tensor's dims): read as a scalar.
bool broadcast_scalar(const op::Tensor& t) {
  const op::Dims& st = t.strides();
  return t.producer() < 0 && !st.empty() &&
         std::all_of(st.begin(), st.end(), [](int64_t x) { return x == 0; });
}

class FusedEngine : public plan::Engine {
 public:
  FusedEngine(int64_t id, const std::string& name) : Engine(id, name) {
    caps_ = native_capabilities();
  }
  const plan::Capabilities& capabilities() const override { return caps_; }

  void check_support(const op::Graph& graph, const plan::Facts&,
                     const DeviceProperties&) const override {
    const auto nodes = graph.nodes();
    require(!nodes.empty(), name(), "the graph has no node");
    require(nodes.size() <= static_cast<std::size_t>(kFusedMaxInstructions), name(),
            "serves at most " + std::to_string(kFusedMaxInstructions) + " nodes");
    uint8_t op;
    for (const op::Node& n : nodes)
      require(fused_op_of(n.op(), op), name(), "no kernel for op " + n.op());
    const op::Dims shape = iteration_shape(graph);
    require(shape.size() <= static_cast<std::size_t>(kFusedMaxDims), name(),
            "serves at most " + std::to_string(kFusedMaxDims) + " dims");
    int inputs = 0, outputs = 0;
    for (const op::Tensor& t : graph.tensors()) {
      FusedType type;
      require(fused_type_of(t.dtype(), type), name(),
              "tensor '" + t.name() + "' is " + std::string(dtype_name(t.dtype())) +
                  "; the kernel holds f32, f16, bf16 and boolean (u8 as an input)");
      require(type != FusedType::u8 || t.producer() < 0, name(),
              "tensor '" + t.name() + "' is u8: the kernel reads u8 inputs, it writes none");
      require(!t.ragged_offset().defined(), name(), "ragged tensors are not served");
      if (t.producer() < 0) ++inputs;
      if (t.producer() >= 0 && !t.is_virtual()) {
        ++outputs;
        require(t.dims() == shape, name(),
                "output '" + t.name() + "' must have the full broadcast shape");
      }
      if (!t.is_virtual() && !broadcast_scalar(t)) require_row_major(t, name());
    }
    require(inputs <= kFusedMaxInputs, name(),
            "serves at most " + std::to_string(kFusedMaxInputs) + " inputs");
    require(outputs >= 1 && outputs <= kFusedMaxOutputs, name(),
            "needs 1 to " + std::to_string(kFusedMaxOutputs) + " outputs the caller receives");
    if (!fused_launcher()) throw NotSupported(name() + ": no kernel in this build (no CUDA)");
  }

  std::shared_ptr<const plan::CompiledPlan> build_plan(
      const op::Graph& graph, const plan::Facts&, const plan::PlanConfig&,
      const plan::BuildContext& ctx) const override {
    const Device device = plan_device(ctx);
    const op::Dims shape = iteration_shape(graph);
    FusedProgram p{};
    p.ndim = static_cast<int32_t>(shape.size());
    p.numel = element_count(shape);
    std::copy(shape.begin(), shape.end(), p.dims);
    plan::OperandRules rules;
    std::vector<int> in_pos, out_pos;
    std::map<int, int> reg;  // tensor index -> register
    for (const op::Tensor& t : graph.tensors()) {
      if (t.producer() >= 0) continue;
      const int k = p.inputs++;
      reg[t.index()] = k;
      fused_type_of(t.dtype(), p.in_type[k]);
      const bool scalar = broadcast_scalar(t);
      rules.add(*ctx.layout, t, device, /*row_major=*/!scalar);
      in_pos.push_back(ctx.layout->index_of(t));
      // Strides over the iteration dims, right-aligned; 0 where the input broadcasts.
      const op::Dims& d = t.dims();
      p.in_dense[k] = d == shape && !scalar;
      p.in_scalar[k] = scalar || element_count(d) == 1;
      p.in_splat[k] = scalar || d.empty() || d.back() == 1;
      int64_t stride = 1;
      for (std::size_t i = d.size(); i-- > 0;) {
        const std::size_t at = shape.size() - d.size() + i;
        p.in_strides[k][at] = d[i] == 1 ? 0 : stride;
        stride *= d[i];
      }
    }
    for (const op::Node& n : graph.nodes()) {
      uint8_t op;
      fused_op_of(n.op(), op);
      // Operands in port order: where's (cond, a, b), else (a, b); a missing one repeats a.
      const op::Tensor out = n.output("out");
      std::vector<uint8_t> regs;
      for (const auto& [port, t] : n.inputs())
        regs.push_back(static_cast<uint8_t>(reg.at(t.index())));
      while (regs.size() < 3) regs.push_back(regs.front());
      // where(cond, a, a) is a whatever cond holds (a derivative's broadcast of a cotangent to
      // a tensor's shape): a copy, cond not read.
      if (op == static_cast<uint8_t>(FusedExtra::where) && regs[1] == regs[2]) {
        op = static_cast<uint8_t>(FusedExtra::cast);
        regs = {regs[1], regs[1], regs[1]};
      }
      const int k = p.instructions++;
      const int dst = p.inputs + k;
      FusedType type;
      fused_type_of(out.dtype(), type);
      p.code[k] = {op, static_cast<uint8_t>(dst), regs[0], regs[1], regs[2], type};
      reg[out.index()] = dst;
      if (!out.is_virtual()) {
        rules.add(*ctx.layout, out, device, /*row_major=*/true);
        out_pos.push_back(ctx.layout->index_of(out));
        p.out_type[p.outputs] = type;
        p.out_reg[p.outputs++] = static_cast<uint8_t>(dst);
      }
    }
    for (int k = 0; k < p.inputs; ++k) {
      bool read = false;
      for (int i = 0; i < p.instructions; ++i)
        read = read || p.code[i].a == k || p.code[i].b == k || p.code[i].c == k;
      for (int o = 0; o < p.outputs; ++o) read = read || p.out_reg[o] == k;
      p.in_unread[k] = !read;
    }
    compact_registers(p);
    return std::make_shared<FusedPlan>(std::move(rules), std::move(in_pos), std::move(out_pos), p,
                                       fused_launcher(), std::max(1, ctx.device.multiprocessors));
  }

 private:
  plan::Capabilities caps_;
};

}  // namespace

std::unique_ptr<plan::Engine> make_fused_engine(int64_t id, const std::string& name) {
  return std::make_unique<FusedEngine>(id, name);
}

}  // namespace eagle::native
