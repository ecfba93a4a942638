#include "engines/native/normalization_engine.hpp"

#include <vector>

#include "eagle/plan/operand_rules.hpp"
#include "engines/native/launch_status.hpp"
#include "engines/native/norm_kernels.hpp"
#include "engines/native/softmax_kernels.hpp"
#include "engines/native/structured_support.hpp"

namespace eagle::native {

namespace {

// One geometry and launcher per path: [0] vectorized (16-byte packs; null when the row length
// is no multiple of a pack), [1] scalar. run() takes [0] when every pointer is aligned.
template <class Launcher>
struct Paths {
  RowGeometry geo[2];
  Launcher launch[2] = {nullptr, nullptr};
  int pick(std::initializer_list<const void*> ptrs) const noexcept {
    if (!launch[0]) return 1;
    for (const void* p : ptrs)
      if (p && !aligned16(p)) return 1;
    return 0;
  }
};

template <class Launcher, class Make>
Paths<Launcher> paths(int64_t rows, int64_t len, DType dtype, int sms, Make make) {
  Paths<Launcher> p;
  const int vec = row_vec(len, static_cast<int>(itemsize(dtype)));
  p.geo[1] = row_geometry(rows, len, 1, sms);
  p.launch[1] = make(dtype, p.geo[1]);
  if (vec > 1) {
    p.geo[0] = row_geometry(rows, len, vec, sms);
    p.launch[0] = make(dtype, p.geo[0]);
  }
  return p;
}

class SoftmaxPlan : public plan::CompiledPlan {
 public:
  SoftmaxPlan(plan::OperandRules rules, int x, int y, SoftmaxArgs args, Paths<SoftmaxLauncher> p)
      : rules_(std::move(rules)), x_(x), y_(y), args_(args), paths_(p) {}

  bool run(const plan::OperandBuffer* ops,
           const plan::ExecutionContext& ctx) const noexcept override {
    if (!rules_.match(ops)) return false;
    if (args_.rows == 0 || args_.len == 0) return true;
    SoftmaxArgs a = args_;
    a.x = ops[x_].data;
    a.y = ops[y_].data;
    const int k = paths_.pick({a.x, a.y});
    return paths_.launch[k](a, paths_.geo[k], ctx.stream);
  }
  void explain(const plan::OperandBuffer* ops, const plan::ExecutionContext&) const override {
    rules_.explain(ops);
    throw CudaError(std::string("native softmax: launch failed: ") + structured_launch_error());
  }

 private:
  plan::OperandRules rules_;
  int x_, y_;
  SoftmaxArgs args_;
  Paths<SoftmaxLauncher> paths_;
};

class NormPlan : public plan::CompiledPlan {
 public:
  // Positions of x, scale, bias, y, mean, inv_std (-1: absent).
  NormPlan(plan::OperandRules rules, std::vector<int> pos, NormArgs args, Paths<NormLauncher> p)
      : rules_(std::move(rules)), pos_(std::move(pos)), args_(args), paths_(p) {}

  bool run(const plan::OperandBuffer* ops,
           const plan::ExecutionContext& ctx) const noexcept override {
    if (!rules_.match(ops)) return false;
    if (args_.rows == 0) return true;
    const auto at = [&](int i) -> void* { return pos_[i] >= 0 ? ops[pos_[i]].data : nullptr; };
    NormArgs a = args_;
    a.x = at(0);
    a.scale = at(1);
    a.bias = at(2);
    a.y = at(3);
    a.mean = static_cast<float*>(at(4));
    a.inv_std = static_cast<float*>(at(5));
    const int k = paths_.pick({a.x, a.scale, a.bias, a.y});
    return paths_.launch[k](a, paths_.geo[k], ctx.stream);
  }
  void explain(const plan::OperandBuffer* ops, const plan::ExecutionContext&) const override {
    rules_.explain(ops);
    throw CudaError(std::string("native norm: launch failed: ") + structured_launch_error());
  }

 private:
  plan::OperandRules rules_;
  std::vector<int> pos_;
  NormArgs args_;
  Paths<NormLauncher> paths_;
};

class NormalizationEngine : public plan::Engine {
 public:
  NormalizationEngine(int64_t id, const std::string& name) : Engine(id, name) {
    caps_.device = DeviceKind::cuda;
    caps_.sm_lo = 80;  // plain CUDA C++, built for Ampere and Hopper (EAGLE_CUDA_ARCHITECTURES)
    caps_.sm_hi = 1299;
    caps_.dtypes = {DType::f32, DType::f16, DType::bf16};
  }
  const plan::Capabilities& capabilities() const override { return caps_; }

  void check_support(const op::Graph& graph, const plan::Facts&,
                     const DeviceProperties&) const override {
    const op::Node node = single_node(graph, name(), {"softmax", "layer_norm", "rms_norm"});
    const op::Tensor x = node.input("x");
    require_float_io(x.dtype(), "x", name());
    require_output(node, "y", name());
    for (const auto& [port, t] : node.inputs()) {
      require(t.dtype() == x.dtype(), name(),
              port + " must have x's dtype " + std::string(dtype_name(x.dtype())) + ", not " +
                  std::string(dtype_name(t.dtype())));
      require_row_major(t, name());
    }
    for (const auto& [port, t] : node.outputs()) require_row_major(t, name());
    if (node.op() == "softmax") {
      const auto& dims = x.dims();
      const int64_t rank = static_cast<int64_t>(dims.size());
      int64_t axis = node.attr("axis").as_int("axis");
      if (axis < 0) axis += rank;
      for (int64_t d = axis + 1; d < rank; ++d)
        require(dims[d] == 1, name(),
                "softmax runs over the last axis; axis " + std::to_string(axis) +
                    " has dims of size > 1 after it");
    }
    if (!norm_launcher(x.dtype(), row_geometry(1, 1, 1, 1)) ||
        !softmax_launcher(x.dtype(), row_geometry(1, 1, 1, 1)))
      throw NotSupported(name() + ": no kernel in this build (no CUDA)");
  }

  std::shared_ptr<const plan::CompiledPlan> build_plan(
      const op::Graph& graph, const plan::Facts&, const plan::PlanConfig&,
      const plan::BuildContext& ctx) const override {
    const op::Node node = graph.nodes()[0];
    const Device device = plan_device(ctx);
    const op::Tensor x = node.input("x"), y = node.output("y");
    const DType dtype = x.dtype();
    const int sms = ctx.device.multiprocessors;
    plan::OperandRules rules;
    const auto position = [&](const op::Tensor& t) {
      if (!receives(t)) return -1;
      rules.add(*ctx.layout, t, device, /*row_major=*/true);
      return ctx.layout->index_of(t);
    };
    const int64_t numel = element_count(x.dims());
    if (node.op() == "softmax") {
      // The axis' extent: the size-1 dims after it (check_support) do not change the rows.
      const int64_t rank = static_cast<int64_t>(x.dims().size());
      int64_t axis = node.attr("axis").as_int("axis");
      if (axis < 0) axis += rank;
      const int64_t len = x.dims()[axis];
      const int64_t rows = len == 0 ? 0 : numel / len;
      SoftmaxArgs args{nullptr, nullptr, rows, len, node.attr("log").as_bool("log")};
      const int xp = position(x), yp = position(y);
      return std::make_shared<SoftmaxPlan>(
          std::move(rules), xp, yp, args,
          paths<SoftmaxLauncher>(rows, len, dtype, sms, &softmax_launcher));
    }
    const bool centered = node.op() == "layer_norm";
    const int64_t nd = node.attr("normalized_ndim").as_int("normalized_ndim");
    const op::Dims& dims = x.dims();
    const int64_t len = element_count(op::Dims(dims.end() - nd, dims.end()));
    const int64_t rows = element_count(op::Dims(dims.begin(), dims.end() - nd));
    NormArgs args{};
    args.rows = rows;
    args.len = len;
    args.epsilon = static_cast<float>(node.attr("epsilon").as_real("epsilon"));
    args.centered = centered;
    std::vector<int> pos = {position(x),
                            position(node.input("scale")),
                            position(node.input("bias")),
                            position(y),
                            centered ? position(node.output("mean")) : -1,
                            position(node.output(centered ? "inv_variance" : "inv_rms"))};
    return std::make_shared<NormPlan>(std::move(rules), std::move(pos), args,
                                      paths<NormLauncher>(rows, len, dtype, sms, &norm_launcher));
  }

 private:
  plan::Capabilities caps_;
};

}  // namespace

std::unique_ptr<plan::Engine> make_normalization_engine(int64_t id, const std::string& name) {
  return std::make_unique<NormalizationEngine>(id, name);
}

}  // namespace eagle::native
