#include "eagle/engines/planned_kernel.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <stdexcept>
#include <utility>

#include "eagle/core/array.hpp"
#include "eagle/core/error.hpp"
#include "eagle/core/shape.hpp"
#include "eagle/core/stream.hpp"
#include "engines/graph_segments.hpp"
#include "engines/planned_derivative.hpp"
#include "engines/planned_kernel_of.hpp"

namespace eagle::engines {

namespace {

// The argument block seen as operand buffers; kept on the stack for the usual operand counts.
class Operands {
 public:
  Operands(const ArgBlock& args, Device device) {
    const int n = args.num_arrays();
    plan::OperandBuffer* out = inline_;
    if (n > kInline) {
      heap_.resize(static_cast<std::size_t>(n));
      out = heap_.data();
    }
    for (int i = 0; i < n; ++i) {
      const ArrayArg& a = args.array(i);
      plan::OperandBuffer& b = out[i];
      b.data = a.data;
      b.dtype = static_cast<DType>(a.dtype);
      b.ndim = a.ndim;
      for (int d = 0; d < a.ndim; ++d) {
        b.dims[d] = a.dims[d];
        b.strides[d] = a.strides[d];
      }
      b.device = device;
    }
    data_ = out;
  }
  const plan::OperandBuffer* data() const { return data_; }

 private:
  static constexpr int kInline = 16;
  plan::OperandBuffer inline_[kInline];
  std::vector<plan::OperandBuffer> heap_;
  const plan::OperandBuffer* data_ = nullptr;
};

// A planned operation as a node's Call: the compiled plan of one device, run with the node's
// argument block as its operands (in the layout's order), in the context the executor owns.
class PlannedCall final : public Call {
 public:
  PlannedCall(plan::ExecutionPlans plans, Device device)
      : plans_(std::make_shared<plan::ExecutionPlans>(std::move(plans))),
        compiled_(plans_->compiled()),
        device_(device) {}

  const Library* library() const override { return compiled_->library(); }
  std::size_t workspace_bytes(const ArgBlock&, Device) const override {
    return compiled_->workspace_bytes();
  }

  void run(const ArgBlock& args, const CallContext& ctx) const override {
    Operands ops(args, device_);
    if (compiled_->run(ops.data(), ctx)) return;
    compiled_->explain(ops.data(), ctx);
    throw std::logic_error("planned call: the plan refused the call but names no rule");
  }
  bool populate_cuda_graph(const ArgBlock& args, const CallContext& ctx,
                           void* graph) const override {
    Operands ops(args, device_);
    return compiled_->populate_cuda_graph(ops.data(), ctx, graph);
  }
  bool update_cuda_graph(const ArgBlock& args, const CallContext& ctx, void* graph) const override {
    Operands ops(args, device_);
    return compiled_->update_cuda_graph(ops.data(), ctx, graph);
  }

 private:
  std::shared_ptr<plan::ExecutionPlans> plans_;
  std::shared_ptr<const plan::CompiledPlan> compiled_;
  Device device_;
};

// Whether `graph` reads a batch's sequence offsets (a cu_seqlens port, a tensor's ragged offset):
// on zero-filled scratch they are an empty batch, whose timing ranks nothing.
bool reads_sequence_offsets(const op::Graph& graph) {
  for (const op::Node& node : graph.nodes())
    for (const auto& [port, tensor] : node.inputs())
      if (port.rfind("cu_seqlens", 0) == 0 || tensor.ragged_offset().defined()) return true;
  return false;
}

// plan::autotune over scratch operands on `device`: one zero-filled block holding every operand
// at its declared dims and strides (each view's byte extent, 256-byte aligned), freed when the
// timing is done.
void autotune_on_scratch(plan::ExecutionPlans& plans, Device device,
                         const plan::AutotuneOptions& options) {
  const plan::OperandLayout& layout = plans.layout();
  std::vector<int64_t> first;  // byte offset of each operand's first element in the block
  int64_t bytes = 0;
  for (int i = 0; i < layout.size(); ++i) {
    const op::Tensor& t = layout.tensor_at(i);
    const ByteExtent e = checked_byte_extent(t.dims(), t.strides(), t.dtype(), t.name());
    first.push_back(bytes - e.lo);
    bytes += (e.hi - e.lo + 255) / 256 * 256;
  }
  bytes = std::max<int64_t>(bytes, 1);
  const Array scratch =
      Array::from(std::vector<uint8_t>(static_cast<std::size_t>(bytes), 0), {bytes}, device);
  plan::VariantPack pack(layout);
  for (int i = 0; i < layout.size(); ++i) {
    const op::Tensor& t = layout.tensor_at(i);
    pack.set_at(i, plan::Operand::raw(static_cast<char*>(scratch.data()) + first[i], t.dims(),
                                      t.dtype(), device, t.strides()));
  }
  const Stream stream(device);
  plan::ExecutionContext ctx{stream.native(), nullptr, nullptr, 0};
  ctx.device = device;
  plan::autotune(plans, pack, ctx, options);
  stream.synchronize();
}

// Whether entry `index` is of the engine (or the backend) called `name`.
bool entry_of(const plan::ExecutionPlans& plans, const plan::Manifest& manifest, int index,
              const std::string& name) {
  if (const plan::Engine* e = manifest.engine(plans.at(index).engine_id)) return e->name() == name;
  return manifest.backend() && manifest.backend()->name() == name;
}

// PlanningOptions::prefer: keeps the first entry of a named engine that builds, the names taken
// in order; false (nothing selected) when none does.
bool build_preferred(plan::ExecutionPlans& plans, const plan::Manifest& manifest,
                     const std::vector<std::string>& prefer) {
  for (const std::string& name : prefer)
    for (int i = 0; i < plans.count(); ++i) {
      if (!entry_of(plans, manifest, i, name)) continue;
      try {
        plans.build_plan_at_index(i);
      } catch (const NotSupported&) {
        continue;
      }
      plans.select_plan(i);
      plans.build_plans();
      return true;
    }
  return false;
}

void check_preferred(const std::vector<std::string>& prefer, const plan::Manifest& manifest) {
  for (const std::string& name : prefer) {
    bool known = manifest.backend() && manifest.backend()->name() == name;
    for (const plan::EngineFamily& f : manifest.families())
      for (const plan::EngineSlot& slot : f.slots) known = known || slot.name == name;
    if (!known)
      throw InvalidArgument("planned_kernel: prefer names '" + name +
                            "', which is neither an engine of the manifest nor its backend");
  }
}

// An epilogue segment that no engine serves whole on a device (a matmul and its pointwise
// chain, planned_segments): the segment's unfused pieces, planned apart and run in order in one
// call. Each piece reads its operands from the segment's argument block (`operand`: the index of
// each of the piece's operands there, or, for a tensor passing between pieces that the segment
// keeps to itself, -1 - its index in `scratch`: a contiguous slice of the call's workspace).
class CompositeCall final : public Call {
 public:
  struct Piece {
    std::shared_ptr<plan::ExecutionPlans> plans;
    std::shared_ptr<const plan::CompiledPlan> compiled;
    std::vector<int> operand;
  };
  struct Scratch {
    op::Dims dims;
    DType dtype;
    std::size_t offset;  // bytes into the workspace
  };
  CompositeCall(std::vector<Piece> pieces, std::vector<Scratch> scratch, std::size_t scratch_bytes,
                Device device)
      : pieces_(std::move(pieces)),
        scratch_(std::move(scratch)),
        scratch_bytes_(scratch_bytes),
        device_(device) {
    for (const Piece& p : pieces_) {
      piece_workspace_ = std::max(piece_workspace_, p.compiled->workspace_bytes());
      if (const Library* l = p.compiled->library()) library_ = l;
    }
  }

  const Library* library() const override { return library_; }
  std::size_t workspace_bytes(const ArgBlock&, Device) const override {
    return scratch_bytes_ + piece_workspace_;
  }

  void run(const ArgBlock& args, const CallContext& ctx) const override {
    Operands ops(args, device_);
    CallContext piece_ctx = ctx;
    piece_ctx.workspace = static_cast<char*>(ctx.workspace) + scratch_bytes_;
    piece_ctx.workspace_bytes = ctx.workspace_bytes - scratch_bytes_;
    std::vector<plan::OperandBuffer> sub;
    for (const Piece& p : pieces_) {
      sub.clear();
      for (int i : p.operand) sub.push_back(i >= 0 ? ops.data()[i] : scratch_at(-1 - i, ctx));
      if (p.compiled->run(sub.data(), piece_ctx)) continue;
      p.compiled->explain(sub.data(), piece_ctx);
      throw std::logic_error("planned call: a piece's plan refused the call but names no rule");
    }
  }

 private:
  plan::OperandBuffer scratch_at(int k, const CallContext& ctx) const {
    const Scratch& s = scratch_[static_cast<std::size_t>(k)];
    plan::OperandBuffer b;
    b.data = static_cast<char*>(ctx.workspace) + s.offset;
    b.dtype = s.dtype;
    b.ndim = static_cast<int32_t>(s.dims.size());
    const op::Dims strides = contiguous_strides(s.dims);
    for (std::size_t d = 0; d < s.dims.size(); ++d) {
      b.dims[d] = s.dims[d];
      b.strides[d] = strides[d];
    }
    b.device = device_;
    return b;
  }

  std::vector<Piece> pieces_;
  std::vector<Scratch> scratch_;
  std::size_t scratch_bytes_ = 0, piece_workspace_ = 0;
  Device device_;
  const Library* library_ = nullptr;
};

// Plans the operation once per device. The graph it was made from is copied once, when the
// kernel is made; the first device plans that copy itself, each further device a clone of it
// (planning claims and freezes the graph it is given; a clone is unplanned). With
// `split_when_unserved` (an epilogue segment), a graph no engine serves on the device is planned
// as its unfused pieces instead, run in order as one call.
class PlannedBinder : public CallBinder {
 public:
  PlannedBinder(const op::Graph& graph, PlanningOptions options, const plan::Manifest& manifest,
                bool split_when_unserved)
      : source_(graph),
        options_(std::move(options)),
        manifest_(manifest),
        split_(split_when_unserved) {}

  std::shared_ptr<const Call> bind(Device device) const override {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto key = std::make_pair(static_cast<int>(device.kind()), device.ordinal());
    auto it = calls_.find(key);
    if (it != calls_.end()) return it->second;
    std::shared_ptr<const Call> call;
    try {
      op::Graph graph = source_used_ ? source_.clone() : source_;
      source_used_ = true;
      call = std::make_shared<const PlannedCall>(plans_for(graph, device), device);
    } catch (const NotSupported&) {
      if (!split_) throw;
      call = composite(device);
    }
    calls_.emplace(key, call);
    return call;
  }

 private:
  plan::ExecutionPlans plans_for(op::Graph& graph, Device device) const {
    plan::ExecutionPlans plans =
        plan::ExecutionPlans::create(graph, manifest_, device, options_.modes);
    if (build_preferred(plans, manifest_, options_.prefer)) return plans;
    if (options_.autotune && !reads_sequence_offsets(graph))
      autotune_on_scratch(plans, device, *options_.autotune);
    else
      plans.build_plans();
    return plans;
  }

  std::shared_ptr<const Call> composite(Device device) const {
    std::map<int64_t, int> index;  // operand uid -> position in the argument block, or -1 - k
    const std::vector<op::Tensor> operands = source_.operand_tensors();
    for (std::size_t i = 0; i < operands.size(); ++i)
      index[operands[i].uid()] = static_cast<int>(i);
    std::vector<CompositeCall::Scratch> scratch;
    std::size_t scratch_bytes = 0;
    const auto position = [&](int64_t uid) {
      if (auto it = index.find(uid); it != index.end()) return it->second;
      const op::Tensor t = source_.tensor_by_uid(uid);  // virtual: it lives in the workspace
      scratch.push_back({t.dims(), t.dtype(), scratch_bytes});
      scratch_bytes += (checked_nbytes(t.dims(), t.dtype(), "planned kernel") + 255) / 256 * 256;
      return index[uid] = -static_cast<int>(scratch.size());
    };
    std::vector<CompositeCall::Piece> pieces;
    for (detail::Segment& seg : detail::segments(source_, /*fuse_epilogues=*/false)) {
      CompositeCall::Piece p;
      std::size_t in = 0, out = 0;
      for (const op::Tensor& t : seg.graph.operand_tensors())
        p.operand.push_back(position(t.producer() < 0 ? seg.inputs[in++] : seg.outputs[out++]));
      p.plans = std::make_shared<plan::ExecutionPlans>(plans_for(seg.graph, device));
      p.compiled = p.plans->compiled();
      pieces.push_back(std::move(p));
    }
    return std::make_shared<const CompositeCall>(std::move(pieces), std::move(scratch),
                                                 scratch_bytes, device);
  }

  op::Graph source_;
  mutable bool source_used_ = false;
  PlanningOptions options_;
  const plan::Manifest& manifest_;
  bool split_;
  mutable std::mutex mutex_;
  mutable std::map<std::pair<int, int>, std::shared_ptr<const Call>> calls_;
};

}  // namespace

Kernel planned_kernel(const op::Graph& graph, const std::vector<plan::HeurMode>& modes,
                      const plan::Manifest& manifest) {
  return planned_kernel(graph, PlanningOptions{modes, std::nullopt, false}, manifest);
}

Kernel planned_kernel(const op::Graph& graph, const PlanningOptions& options,
                      const plan::Manifest& manifest) {
  return detail::planned_kernel_of(graph, options, manifest, false);
}

namespace detail {

Kernel planned_kernel_of(const op::Graph& graph, const PlanningOptions& options,
                         const plan::Manifest& manifest, bool split_when_unserved) {
  if (options.autotune) plan::check_autotune_options(*options.autotune);
  check_preferred(options.prefer, manifest);
  graph.validate();
  const std::vector<op::Tensor> operands = graph.operand_tensors();
  KernelDef def;
  def.name = graph.name();
  std::vector<ArrayMeta> outputs;
  std::vector<std::pair<std::string, ArrayMeta>> inputs;
  for (const op::Tensor& t : operands) {
    const bool input = t.producer() < 0;
    // A tensor declared with other strides than row-major (a transposed view, as the backward
    // of a matmul reads) takes a strided view as is.
    def.arrays.push_back({t.name(), input ? Access::read : Access::write,
                          t.strides() != contiguous_strides(t.dims())});
    (input ? inputs.emplace_back(t.name(), ArrayMeta{t.dims(), t.dtype()}).second
           : outputs.emplace_back(ArrayMeta{t.dims(), t.dtype()}));
  }
  def.per_sample = false;
  def.infer = [name = graph.name(), inputs, outputs](const std::vector<ArrayMeta>& given,
                                                     const std::vector<ScalarArg>&) {
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const ArrayMeta& want = inputs[i].second;
      if (given[i].shape != want.shape || given[i].dtype != want.dtype)
        throw InvalidArgument(name + ": argument '" + inputs[i].first + "' is " +
                              std::string(dtype_name(given[i].dtype)) + shape_str(given[i].shape) +
                              "; the operation graph declares " +
                              std::string(dtype_name(want.dtype)) + shape_str(want.shape));
    }
    return outputs;
  };
  def.binder =
      std::make_shared<PlannedBinder>(graph.clone(), options, manifest, split_when_unserved);
  def.derivative = planned_derivative(graph, options, manifest);
  return Kernel(std::move(def));
}

std::vector<PlannedSegment> planned_kernels_of(std::vector<Segment> segments,
                                               const PlanningOptions& options,
                                               const plan::Manifest& manifest) {
  std::vector<PlannedSegment> out;
  for (Segment& s : segments)
    out.push_back({planned_kernel_of(s.graph, options, manifest, s.epilogue), std::move(s.inputs),
                   std::move(s.outputs)});
  return out;
}

}  // namespace detail

}  // namespace eagle::engines
