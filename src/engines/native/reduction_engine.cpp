#include "engines/native/reduction_engine.hpp"

#include <algorithm>
#include <vector>

#include "eagle/plan/operand_rules.hpp"
#include "engines/native/launch_status.hpp"
#include "engines/native/reduction_kernels.hpp"
#include "engines/native/structured_support.hpp"

namespace eagle::native {

namespace {

// Split rows into chunks when there are too few to fill the device: about two pieces per
// resident block, each at least kMinChunk elements (whole 16-byte packs). Untimed defaults.
constexpr int64_t kMinChunk = 8192;
constexpr int64_t kPiecesPerBlock = 2;
// The column path: split the reduced axis until about kPiecesPerBlock tiles per resident block,
// each thread keeping at least kMinColumnRows rows of its chunk.
constexpr int64_t kMinColumnRows = 16;
// The strided path's chunks: at least this many reduced elements per thread.
constexpr int64_t kMinStridedChunk = 64;

// x's dims with size-1 dims dropped and neighbours of one kind (kept or reduced) merged, each
// run with its row-major stride (of its innermost dim).
struct Run {
  int64_t size, stride;
  bool reduced;
};
std::vector<Run> runs_of(const op::Dims& dims, const std::vector<bool>& reduced) {
  std::vector<Run> runs;
  std::vector<int64_t> strides(dims.size());
  int64_t s = 1;
  for (std::size_t i = dims.size(); i-- > 0;) strides[i] = s, s *= dims[i];
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 1) continue;
    if (!runs.empty() && runs.back().reduced == reduced[i]) {
      runs.back().size *= dims[i];
      runs.back().stride = strides[i];
    } else {
      runs.push_back({dims[i], strides[i], reduced[i]});
    }
  }
  return runs;
}

std::vector<bool> reduced_axes(const op::Node& node) {
  const std::size_t rank = node.input("x").dims().size();
  const auto& axes = node.attr("axes").as_ints("axes");
  std::vector<bool> reduced(rank, axes.empty());
  for (int64_t a : axes) reduced[static_cast<std::size_t>(a < 0 ? a + int64_t(rank) : a)] = true;
  return reduced;
}

class RowReducePlan : public plan::CompiledPlan {
 public:
  RowReducePlan(plan::OperandRules rules, int x, int y, RowReduceArgs args, RowGeometry geo[2],
                RowReduceLauncher launch[2])
      : rules_(std::move(rules)), x_(x), y_(y), args_(args) {
    for (int k = 0; k < 2; ++k) geo_[k] = geo[k], launch_[k] = launch[k];
  }
  std::size_t workspace_bytes() const override {
    return args_.splits > 1 ? static_cast<std::size_t>(args_.rows * args_.splits) * 8 : 0;
  }
  bool run(const plan::OperandBuffer* ops,
           const plan::ExecutionContext& ctx) const noexcept override {
    if (!rules_.match(ops) || ctx.workspace_bytes < workspace_bytes()) return false;
    if (args_.rows == 0) return true;
    RowReduceArgs a = args_;
    a.x = ops[x_].data;
    a.y = ops[y_].data;
    a.partials = static_cast<double*>(ctx.workspace);
    const int k = launch_[0] && aligned16(a.x) ? 0 : 1;
    return launch_[k](a, geo_[k], ctx.stream);
  }
  void explain(const plan::OperandBuffer* ops, const plan::ExecutionContext& ctx) const override {
    explain_refusal(rules_, ops, ctx, workspace_bytes(), "native reduction");
  }

 private:
  plan::OperandRules rules_;
  int x_, y_;
  RowReduceArgs args_;
  RowGeometry geo_[2];
  RowReduceLauncher launch_[2];
};

class StridedReducePlan : public plan::CompiledPlan {
 public:
  StridedReducePlan(plan::OperandRules rules, int x, int y, StridedReduceArgs args,
                    StridedReduceLauncher launch, unsigned grid)
      : rules_(std::move(rules)), x_(x), y_(y), args_(args), launch_(launch), grid_(grid) {}
  std::size_t workspace_bytes() const override {
    return args_.splits > 1 ? static_cast<std::size_t>(args_.outputs * args_.splits) * 8 : 0;
  }
  bool run(const plan::OperandBuffer* ops,
           const plan::ExecutionContext& ctx) const noexcept override {
    if (!rules_.match(ops) || ctx.workspace_bytes < workspace_bytes()) return false;
    if (args_.outputs == 0) return true;
    StridedReduceArgs a = args_;
    a.x = ops[x_].data;
    a.y = ops[y_].data;
    a.partials = static_cast<double*>(ctx.workspace);
    return launch_(a, grid_, kThreads, ctx.stream);
  }
  void explain(const plan::OperandBuffer* ops, const plan::ExecutionContext& ctx) const override {
    explain_refusal(rules_, ops, ctx, workspace_bytes(), "native reduction");
  }
  static constexpr unsigned kThreads = 256;

 private:
  plan::OperandRules rules_;
  int x_, y_;
  StridedReduceArgs args_;
  StridedReduceLauncher launch_;
  unsigned grid_;
};

// [outer, count, inner] with the middle axis reduced: a vectorized variant (16-byte packs,
// x aligned) and a scalar one, each with its own tile shape and splits.
class ColumnReducePlan : public plan::CompiledPlan {
 public:
  struct Variant {
    ColumnReduceArgs args{};
    ColumnReduceLauncher launch = nullptr;
    unsigned grid = 1;
  };
  ColumnReducePlan(plan::OperandRules rules, int x, int y, Variant vectorized, Variant scalar)
      : rules_(std::move(rules)), x_(x), y_(y), variants_{vectorized, scalar} {}
  std::size_t workspace_bytes() const override {
    std::size_t bytes = 0;
    for (const Variant& v : variants_)
      if (v.launch && v.args.splits > 1)
        bytes = std::max(bytes,
                         static_cast<std::size_t>(v.args.outer * v.args.inner * v.args.splits) * 8);
    return bytes;
  }
  bool run(const plan::OperandBuffer* ops,
           const plan::ExecutionContext& ctx) const noexcept override {
    if (!rules_.match(ops) || ctx.workspace_bytes < workspace_bytes()) return false;
    if (variants_[1].args.outer * variants_[1].args.inner == 0) return true;
    const Variant& v = variants_[0].launch && aligned16(ops[x_].data) ? variants_[0] : variants_[1];
    ColumnReduceArgs a = v.args;
    a.x = ops[x_].data;
    a.y = ops[y_].data;
    a.partials = static_cast<double*>(ctx.workspace);
    return v.launch(a, v.grid, ctx.stream);
  }
  void explain(const plan::OperandBuffer* ops, const plan::ExecutionContext& ctx) const override {
    explain_refusal(rules_, ops, ctx, workspace_bytes(), "native reduction");
  }

 private:
  plan::OperandRules rules_;
  int x_, y_;
  Variant variants_[2];
};

// The column variant for packs of `vec` elements: tile_x threads along inner (a power of two, at
// most a warp), the rest of the block along count; count split until the tiles fill the device.
ColumnReducePlan::Variant column_variant(DType dtype, int vec, int64_t outer, int64_t count,
                                         int64_t inner, ReduceMode mode, int sms) {
  ColumnReducePlan::Variant v;
  v.launch = column_reduce_launcher(dtype, vec);
  ColumnReduceArgs& a = v.args;
  a.outer = outer;
  a.count = count;
  a.inner = inner;
  a.mode = mode;
  const int64_t packs = (inner + vec - 1) / vec;
  a.tile_x = 1;
  while (a.tile_x < 32 && a.tile_x < packs) a.tile_x *= 2;
  a.tile_y = kReduceThreads / a.tile_x;
  const int64_t col_tiles = (packs + a.tile_x - 1) / a.tile_x;
  const int64_t resident = int64_t{sms} * kReduceBlocksPerSm;
  const int64_t base_tiles = outer * col_tiles;
  a.splits = 1;
  a.chunk = count;
  const int64_t most = count / (kMinColumnRows * a.tile_y);
  if (base_tiles < kPiecesPerBlock * resident && most > 1) {
    a.splits = std::min((kPiecesPerBlock * resident + base_tiles - 1) / base_tiles, most);
    a.chunk = (count + a.splits - 1) / a.splits;
    a.splits = (count + a.chunk - 1) / a.chunk;
  }
  v.grid = static_cast<unsigned>(std::clamp<int64_t>(base_tiles * a.splits, 1, resident));
  return v;
}

class ReductionEngine : public plan::Engine {
 public:
  ReductionEngine(int64_t id, const std::string& name) : Engine(id, name) {
    caps_ = native_capabilities();
  }
  const plan::Capabilities& capabilities() const override { return caps_; }

  void check_support(const op::Graph& graph, const plan::Facts&,
                     const DeviceProperties&) const override {
    const op::Node node = single_node(graph, name(), {"reduction"});
    const op::Tensor x = node.input("x");
    // The facts' io dtype is f32 for a graph without floating data: read x's own.
    require_float_io(x.dtype(), "x", name());
    require_output(node, "y", name());
    require_row_major(x, name());
    require_row_major(node.output("y"), name());
    ReduceMode mode = ReduceMode::sum;
    require(reduce_mode_of(node.attr("mode").as_text("mode"), mode), name(), "unknown mode");
    require(x.dims().size() <= 8, name(), "x has more than 8 dims");
    if (!strided_reduce_launcher(x.dtype()))
      throw NotSupported(name() + ": no kernel in this build (no CUDA)");
  }

  std::shared_ptr<const plan::CompiledPlan> build_plan(
      const op::Graph& graph, const plan::Facts&, const plan::PlanConfig&,
      const plan::BuildContext& ctx) const override {
    const op::Node node = graph.nodes()[0];
    const Device device = plan_device(ctx);
    const op::Tensor x = node.input("x"), y = node.output("y");
    plan::OperandRules rules;
    rules.add(*ctx.layout, x, device, true);
    rules.add(*ctx.layout, y, device, true);
    const int xp = ctx.layout->index_of(x), yp = ctx.layout->index_of(y);
    ReduceMode mode = ReduceMode::sum;
    reduce_mode_of(node.attr("mode").as_text("mode"), mode);
    const std::vector<Run> runs = runs_of(x.dims(), reduced_axes(node));
    int64_t outputs = 1, count = 1;
    int kept = 0, reduced = 0;
    for (const Run& r : runs) {
      (r.reduced ? count : outputs) *= r.size;
      ++(r.reduced ? reduced : kept);
    }
    const int sms = std::max(1, ctx.device.multiprocessors);
    if (reduced == 0 || (reduced == 1 && runs.back().reduced)) {
      // Rows: the reduced elements of an output are contiguous.
      RowReduceArgs a{};
      a.rows = outputs;
      a.len = count;
      a.mode = mode;
      a.splits = 1;
      a.chunk = count;
      const int64_t target = kPiecesPerBlock * sms * kReduceBlocksPerSm;
      if (outputs < target && count >= 2 * kMinChunk) {
        a.splits = std::min(count / kMinChunk, (target + outputs - 1) / outputs);
        a.chunk = ((count + a.splits - 1) / a.splits + 15) / 16 * 16;  // whole 16-byte packs
        a.splits = (count + a.chunk - 1) / a.chunk;
      }
      RowGeometry geo[2];
      RowReduceLauncher launch[2] = {nullptr, nullptr};
      const int vec = row_vec(count, static_cast<int>(itemsize(x.dtype())));
      geo[1] = reduce_row_geometry(a.rows * a.splits, a.chunk, 1, sms);
      launch[1] = row_reduce_launcher(x.dtype(), geo[1]);
      if (vec > 1) {
        geo[0] = reduce_row_geometry(a.rows * a.splits, a.chunk, vec, sms);
        launch[0] = row_reduce_launcher(x.dtype(), geo[0]);
      }
      return std::make_shared<RowReducePlan>(std::move(rules), xp, yp, a, geo, launch);
    }
    // [outer, count, inner]: one reduced run, the innermost run kept, at most one kept before.
    const bool columns = reduced == 1 && !runs.back().reduced &&
                         (runs.size() == 2 || (runs.size() == 3 && !runs.front().reduced));
    if (columns) {
      const int64_t inner = runs.back().size, outer = runs.size() == 3 ? runs.front().size : 1;
      const int vec = row_vec(inner, static_cast<int>(itemsize(x.dtype())));
      ColumnReducePlan::Variant variants[2];
      variants[1] = column_variant(x.dtype(), 1, outer, count, inner, mode, sms);
      if (vec > 1) variants[0] = column_variant(x.dtype(), vec, outer, count, inner, mode, sms);
      return std::make_shared<ColumnReducePlan>(std::move(rules), xp, yp, variants[0], variants[1]);
    }
    StridedReduceArgs a{};
    a.outputs = outputs;
    a.count = count;
    a.mode = mode;
    for (const Run& r : runs) {
      if (r.reduced) {
        a.reduced_size[a.reduced_runs] = r.size;
        a.reduced_stride[a.reduced_runs++] = r.stride;
      } else {
        a.kept_size[a.kept_runs] = r.size;
        a.kept_stride[a.kept_runs++] = r.stride;
      }
    }
    // Fewer outputs than a wave of threads: split each output's elements into chunks of at
    // least kMinStridedChunk so about kThreadsPerSm threads per SM run. Untimed default.
    a.splits = 1;
    a.chunk = count;
    const int64_t wave = int64_t{sms} * kThreadsPerSm;
    if (outputs > 0 && outputs < wave && count >= 2 * kMinStridedChunk) {
      a.splits = std::min((wave + outputs - 1) / outputs, count / kMinStridedChunk);
      a.chunk = (count + a.splits - 1) / a.splits;
      a.splits = (count + a.chunk - 1) / a.chunk;
    }
    const int64_t blocks =
        (outputs * a.splits + StridedReducePlan::kThreads - 1) / StridedReducePlan::kThreads;
    const auto grid = static_cast<unsigned>(std::clamp<int64_t>(blocks, 1, int64_t{sms} * 8));
    return std::make_shared<StridedReducePlan>(std::move(rules), xp, yp, a,
                                               strided_reduce_launcher(x.dtype()), grid);
  }

 private:
  plan::Capabilities caps_;
};

}  // namespace

std::unique_ptr<plan::Engine> make_reduction_engine(int64_t id, const std::string& name) {
  return std::make_unique<ReductionEngine>(id, name);
}

}  // namespace eagle::native
