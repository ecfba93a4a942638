#include "engines/native/normalization_engine.hpp"

#include <algorithm>
#include <vector>

#include "eagle/plan/operand_rules.hpp"
#include "engines/native/launch_status.hpp"
#include "engines/native/norm_bwd_kernels.hpp"
#include "engines/native/norm_kernels.hpp"
#include "engines/native/softmax_kernels.hpp"
#include "engines/native/structured_support.hpp"

namespace eagle::native {

namespace {

// The chunk of a split softmax row: elements per block (a few packs a thread).
constexpr int64_t kSplitChunk = 4096;

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

// Few long rows (fewer than about two per SM, 16k+ elements): sets `splits` chunks of `chunk`
// elements (whole 16-byte packs) so a block each fills the device (inference's softmax over a
// vocabulary). Untimed default.
bool split_rows(int64_t rows, int64_t len, int sms, int64_t& splits, int64_t& chunk) {
  const int64_t wave = int64_t{std::max(1, sms)} * 4;
  if (rows == 0 || rows >= wave / 2 || len < 4 * kSplitChunk) return false;
  splits = std::min((len + kSplitChunk - 1) / kSplitChunk, (wave + rows - 1) / rows);
  chunk = ((len + splits - 1) / splits + 15) / 16 * 16;
  splits = (len + chunk - 1) / chunk;
  return splits > 1;
}

// The paths of a split run: the vector width is the row's (its start must be aligned), the
// geometry the chunks'.
template <class Launcher, class Args, class Make>
Paths<Launcher> split_paths(int64_t rows, int64_t len, const Args& args, DType dtype, int sms,
                            Make make) {
  Paths<Launcher> p;
  const int vec = row_vec(len, static_cast<int>(itemsize(dtype)));
  for (int k = vec > 1 ? 0 : 1; k < 2; ++k) {
    p.geo[k] = row_geometry(rows * args.splits, args.chunk, k == 0 ? vec : 1, sms);
    p.launch[k] = make(dtype, p.geo[k]);
  }
  return p;
}

class SoftmaxPlan : public plan::CompiledPlan {
 public:
  SoftmaxPlan(plan::OperandRules rules, int x, int y, SoftmaxArgs args, Paths<SoftmaxLauncher> p)
      : rules_(std::move(rules)), x_(x), y_(y), args_(args), paths_(p) {}

  std::size_t workspace_bytes() const override {
    return args_.splits > 1 ? static_cast<std::size_t>(args_.rows * args_.splits) * 16 : 0;
  }
  bool run(const plan::OperandBuffer* ops,
           const plan::ExecutionContext& ctx) const noexcept override {
    if (!rules_.match(ops) || ctx.workspace_bytes < workspace_bytes()) return false;
    if (args_.rows == 0 || args_.len == 0) return true;
    SoftmaxArgs a = args_;
    a.x = ops[x_].data;
    a.y = ops[y_].data;
    a.partials = static_cast<double*>(ctx.workspace);
    const int k = paths_.pick({a.x, a.y});
    return paths_.launch[k](a, paths_.geo[k], ctx.stream);
  }
  void explain(const plan::OperandBuffer* ops, const plan::ExecutionContext& ctx) const override {
    explain_refusal(rules_, ops, ctx, workspace_bytes(), "native softmax");
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
  void explain(const plan::OperandBuffer* ops, const plan::ExecutionContext& ctx) const override {
    explain_refusal(rules_, ops, ctx, 0, "native norm");
  }

 private:
  plan::OperandRules rules_;
  std::vector<int> pos_;
  NormArgs args_;
  Paths<NormLauncher> paths_;
};

class SoftmaxBwdPlan : public plan::CompiledPlan {
 public:
  SoftmaxBwdPlan(plan::OperandRules rules, int y, int dy, int dx, SoftmaxBwdArgs args,
                 Paths<SoftmaxBwdLauncher> p)
      : rules_(std::move(rules)), y_(y), dy_(dy), dx_(dx), args_(args), paths_(p) {}

  std::size_t workspace_bytes() const override {
    return args_.splits > 1 ? static_cast<std::size_t>(args_.rows * args_.splits) * 8 : 0;
  }
  bool run(const plan::OperandBuffer* ops,
           const plan::ExecutionContext& ctx) const noexcept override {
    if (!rules_.match(ops) || ctx.workspace_bytes < workspace_bytes()) return false;
    if (args_.rows == 0 || args_.len == 0) return true;
    SoftmaxBwdArgs a = args_;
    a.y = ops[y_].data;
    a.dy = ops[dy_].data;
    a.dx = ops[dx_].data;
    a.partials = static_cast<double*>(ctx.workspace);
    const int k = paths_.pick({a.y, a.dy, a.dx});
    return paths_.launch[k](a, paths_.geo[k], ctx.stream);
  }
  void explain(const plan::OperandBuffer* ops, const plan::ExecutionContext& ctx) const override {
    explain_refusal(rules_, ops, ctx, workspace_bytes(), "native softmax_bwd");
  }

 private:
  plan::OperandRules rules_;
  int y_, dy_, dx_;
  SoftmaxBwdArgs args_;
  Paths<SoftmaxBwdLauncher> paths_;
};

class NormBwdPlan : public plan::CompiledPlan {
 public:
  // Positions of dy, x, scale, mean, inv_std, dx, dscale, dbias (-1: absent).
  NormBwdPlan(plan::OperandRules rules, std::vector<int> pos, NormBwdArgs args,
              Paths<NormBwdLauncher> p)
      : rules_(std::move(rules)), pos_(std::move(pos)), args_(args), paths_(p) {}

  // The column sums' partials of whichever path runs (both fixed at build).
  std::size_t workspace_bytes() const override {
    if (pos_[6] < 0 && pos_[7] < 0) return 0;
    std::size_t bytes = 0;
    for (int k = 0; k < 2; ++k)
      if (paths_.launch[k]) bytes = std::max(bytes, norm_bwd_workspace(args_, paths_.geo[k]));
    return bytes;
  }
  bool run(const plan::OperandBuffer* ops,
           const plan::ExecutionContext& ctx) const noexcept override {
    if (!rules_.match(ops) || ctx.workspace_bytes < workspace_bytes()) return false;
    const auto at = [&](int i) -> void* { return pos_[i] >= 0 ? ops[pos_[i]].data : nullptr; };
    NormBwdArgs a = args_;
    a.dy = at(0);
    a.x = at(1);
    a.scale = at(2);
    a.mean = static_cast<const float*>(at(3));
    a.inv_std = static_cast<const float*>(at(4));
    a.dx = at(5);
    a.dscale = at(6);
    a.dbias = at(7);
    a.workspace = ctx.workspace;
    const int k = paths_.pick({a.dy, a.x, a.scale, a.dx});
    return paths_.launch[k](a, paths_.geo[k], ctx.stream);
  }
  void explain(const plan::OperandBuffer* ops, const plan::ExecutionContext& ctx) const override {
    explain_refusal(rules_, ops, ctx, workspace_bytes(), "native norm backward");
  }

 private:
  plan::OperandRules rules_;
  std::vector<int> pos_;
  NormBwdArgs args_;
  Paths<NormBwdLauncher> paths_;
};

// The extent of softmax's axis (check_support: only size-1 dims follow it) and the rows.
std::pair<int64_t, int64_t> softmax_rows(const op::Node& node, const op::Tensor& x) {
  const int64_t rank = static_cast<int64_t>(x.dims().size());
  int64_t axis = node.attr("axis").as_int("axis");
  if (axis < 0) axis += rank;
  const int64_t len = x.dims()[axis];
  return {len == 0 ? 0 : element_count(x.dims()) / len, len};
}

bool is_statistic(const std::string& port) {
  return port == "mean" || port == "inv_variance" || port == "inv_rms";
}

class NormalizationEngine : public plan::Engine {
 public:
  NormalizationEngine(int64_t id, const std::string& name) : Engine(id, name) {
    caps_ = native_capabilities();
  }
  const plan::Capabilities& capabilities() const override { return caps_; }

  void check_support(const op::Graph& graph, const plan::Facts&,
                     const DeviceProperties&) const override {
    const op::Node node = single_node(
        graph, name(),
        {"softmax", "layer_norm", "rms_norm", "softmax_bwd", "layer_norm_bwd", "rms_norm_bwd"});
    const bool bwd = node.op().size() > 4 && node.op().substr(node.op().size() - 4) == "_bwd";
    // The data every floating input but the statistics shares: x forward, dy backward.
    const char* lead = bwd ? "dy" : "x";
    const DType dtype = node.input(lead).dtype();
    require_float_io(dtype, lead, name());
    // A forward whose y is virtual still serves a recompute that keeps its statistics alone.
    bool stats_only = false;
    if (!bwd && node.op() != "softmax")
      for (const auto& [port, t] : node.outputs()) stats_only |= is_statistic(port) && receives(t);
    if (!stats_only) require_output(node, bwd ? "dx" : "y", name());
    for (const auto& [port, t] : node.inputs()) {
      if (is_statistic(port)) {
        require(t.dtype() == DType::f32, name(),
                port + " must be f32 (the forward's statistics), not " +
                    std::string(dtype_name(t.dtype())));
      } else {
        require(t.dtype() == dtype, name(),
                port + " must have " + lead + "'s dtype " + std::string(dtype_name(dtype)) +
                    ", not " + std::string(dtype_name(t.dtype())));
      }
      require_row_major(t, name());
    }
    for (const auto& [port, t] : node.outputs()) require_row_major(t, name());
    if (node.op() == "softmax" || node.op() == "softmax_bwd") {
      const op::Tensor x = node.input(node.op() == "softmax" ? "x" : "y");
      const auto& dims = x.dims();
      const int64_t rank = static_cast<int64_t>(dims.size());
      int64_t axis = node.attr("axis").as_int("axis");
      if (axis < 0) axis += rank;
      for (int64_t d = axis + 1; d < rank; ++d)
        require(dims[d] == 1, name(),
                "softmax runs over the last axis; axis " + std::to_string(axis) +
                    " has dims of size > 1 after it");
    }
    if (!norm_launcher(dtype, row_geometry(1, 1, 1, 1)))
      throw NotSupported(name() + ": no kernel in this build (no CUDA)");
  }

  std::shared_ptr<const plan::CompiledPlan> build_plan(
      const op::Graph& graph, const plan::Facts&, const plan::PlanConfig&,
      const plan::BuildContext& ctx) const override {
    const op::Node node = graph.nodes()[0];
    const Device device = plan_device(ctx);
    plan::OperandRules rules;
    const auto position = [&](const op::Tensor& t) {
      if (!receives(t)) return -1;
      rules.add(*ctx.layout, t, device, /*row_major=*/true);
      return ctx.layout->index_of(t);
    };
    const int sms = ctx.device.multiprocessors;
    if (node.op() == "softmax_bwd") return build_softmax_bwd(node, ctx, rules, position);
    if (node.op() != "softmax" && node.op() != "layer_norm" && node.op() != "rms_norm")
      return build_norm_bwd(node, ctx, rules, position);
    const op::Tensor x = node.input("x"), y = node.output("y");
    const DType dtype = x.dtype();
    if (node.op() == "softmax") {
      const auto [rows, len] = softmax_rows(node, x);
      SoftmaxArgs args{nullptr, nullptr, rows, len, node.attr("log").as_bool("log")};
      const int xp = position(x), yp = position(y);
      if (split_rows(rows, len, sms, args.splits, args.chunk))
        return std::make_shared<SoftmaxPlan>(
            std::move(rules), xp, yp, args,
            split_paths<SoftmaxLauncher>(rows, len, args, dtype, sms, &split_softmax_launcher));
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
  template <class Position>
  static std::shared_ptr<const plan::CompiledPlan> build_softmax_bwd(const op::Node& node,
                                                                     const plan::BuildContext& ctx,
                                                                     plan::OperandRules& rules,
                                                                     Position& position) {
    const op::Tensor y = node.input("y"), dy = node.input("dy"), dx = node.output("dx");
    const auto [rows, len] = softmax_rows(node, y);
    SoftmaxBwdArgs args{nullptr, nullptr, nullptr, rows, len, node.attr("log").as_bool("log")};
    const int yp = position(y), dyp = position(dy), dxp = position(dx);
    const int sms = ctx.device.multiprocessors;
    if (split_rows(rows, len, sms, args.splits, args.chunk))
      return std::make_shared<SoftmaxBwdPlan>(
          std::move(rules), yp, dyp, dxp, args,
          split_paths<SoftmaxBwdLauncher>(rows, len, args, dy.dtype(), sms,
                                          &split_softmax_bwd_launcher));
    return std::make_shared<SoftmaxBwdPlan>(
        std::move(rules), yp, dyp, dxp, args,
        paths<SoftmaxBwdLauncher>(rows, len, dy.dtype(), sms, &softmax_bwd_launcher));
  }

  template <class Position>
  static std::shared_ptr<const plan::CompiledPlan> build_norm_bwd(const op::Node& node,
                                                                  const plan::BuildContext& ctx,
                                                                  plan::OperandRules& rules,
                                                                  Position& position) {
    const bool centered = node.op() == "layer_norm_bwd";
    const op::Tensor x = node.input("x"), dy = node.input("dy");
    const int64_t nd = node.attr("normalized_ndim").as_int("normalized_ndim");
    const op::Dims& dims = x.dims();
    NormBwdArgs args{};
    args.len = element_count(op::Dims(dims.end() - nd, dims.end()));
    args.rows = element_count(op::Dims(dims.begin(), dims.end() - nd));
    // Column sums: chunks of at least 32 rows, about 8 blocks per SM over the column tiles.
    // Untimed defaults.
    const int sms = std::max(1, ctx.device.multiprocessors);
    const int64_t tiles = std::max<int64_t>(1, (args.len + kColumnThreads - 1) / kColumnThreads);
    const int64_t most = (args.rows + 31) / 32;
    args.chunks = std::min<int64_t>({std::max<int64_t>(1, int64_t{sms} * 8 / tiles), most, 65535});
    args.chunk_rows = args.chunks > 0 ? (args.rows + args.chunks - 1) / args.chunks : 0;
    if (args.chunk_rows > 0) args.chunks = (args.rows + args.chunk_rows - 1) / args.chunk_rows;
    std::vector<int> pos = {position(dy),
                            position(x),
                            position(node.input("scale")),
                            centered ? position(node.input("mean")) : -1,
                            position(node.input(centered ? "inv_variance" : "inv_rms")),
                            position(node.output("dx")),
                            position(node.output("dscale")),
                            position(node.output("dbias"))};
    const bool params = pos[6] >= 0 || pos[7] >= 0;
    // The rows' geometry: aligned rows of a block staged, other cached rows up to
    // kNormBwdCachedThreads threads, longer rows streamed; a cached grid of at most one wave (it
    // bounds the slots of partials, so the workspace).
    const int64_t len = args.len;
    Paths<NormBwdLauncher> p = paths<NormBwdLauncher>(
        args.rows, len, dy.dtype(), sms, [params, sms, len](DType d, const RowGeometry& g) {
          return norm_bwd_launcher(d, norm_bwd_geometry(g, len, sms), params);
        });
    for (RowGeometry& g : p.geo) g = norm_bwd_geometry(g, len, sms);
    return std::make_shared<NormBwdPlan>(std::move(rules), std::move(pos), args, p);
  }

  plan::Capabilities caps_;
};

}  // namespace

std::unique_ptr<plan::Engine> make_normalization_engine(int64_t id, const std::string& name) {
  return std::make_unique<NormalizationEngine>(id, name);
}

}  // namespace eagle::native
