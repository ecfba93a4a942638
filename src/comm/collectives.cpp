// The collectives as kernels: each holds its communicator in a CallBinder, which hands the
// graph (or the eager launch) a Call running this rank's side through the communicator's
// backend. Shapes are checked when a call is recorded; the device when the graph is built.
#include "eagle/comm/collectives.hpp"

#include <memory>
#include <string>

#include "comm/backend.hpp"
#include "comm/cpu_reduce.hpp"
#include "eagle/core/shape.hpp"

namespace eagle::comm {

namespace detail {

std::string_view collective_name(Collective c) {
  switch (c) {
    case Collective::all_reduce:
      return "all_reduce";
    case Collective::reduce_scatter:
      return "reduce_scatter";
    case Collective::all_gather:
      return "all_gather";
    case Collective::broadcast:
      return "broadcast";
  }
  return "?";
}

}  // namespace detail

std::string_view reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::sum:
      return "sum";
    case ReduceOp::avg:
      return "avg";
    case ReduceOp::max:
      return "max";
    case ReduceOp::min:
      return "min";
  }
  return "?";
}

namespace {

using detail::Collective;
using detail::CollectiveCall;
using detail::CommImpl;

bool reduces(Collective kind) {
  return kind == Collective::all_reduce || kind == Collective::reduce_scatter;
}

// One rank's collective as a node's Call: the argument block is (x, out).
class CommCall final : public Call {
 public:
  CommCall(std::shared_ptr<CommImpl> comm, Collective kind, ReduceOp op, int root)
      : comm_(std::move(comm)), kind_(kind), op_(op), root_(root) {}

  void run(const ArgBlock& args, const CallContext& ctx) const override {
    comm_->run(describe(args), ctx);
  }
  // NCCL's captured work keeps its resources alive through the graph it was captured into, so
  // a collective enters a CUDA graph as its own child graph, which the executor keeps; never as
  // a lone kernel lifted out of a capture (that would drop those resources). bind() populates
  // it anew.
  bool populate_cuda_graph(const ArgBlock& args, const CallContext& ctx,
                           void* graph) const override {
    return comm_->populate_cuda_graph(describe(args), ctx, graph);
  }

 private:
  CollectiveCall describe(const ArgBlock& args) const {
    const ArrayArg& x = args.array(0);
    const ArrayArg& out = args.array(1);
    CollectiveCall call;
    call.kind = kind_;
    call.op = op_;
    call.root = root_;
    call.dtype = static_cast<DType>(x.dtype);
    call.ndim = x.ndim;
    for (int d = 0; d < x.ndim; ++d) call.dims[d] = x.dims[d];
    call.x = x.data;
    call.out = out.data;
    call.x_count = x.numel;
    call.out_count = out.numel;
    return call;
  }

  std::shared_ptr<CommImpl> comm_;
  Collective kind_;
  ReduceOp op_;
  int root_;
};

class CommBinder final : public CallBinder {
 public:
  CommBinder(std::string name, std::shared_ptr<CommImpl> comm, Collective kind, ReduceOp op,
             int root)
      : name_(std::move(name)),
        comm_(comm),
        call_(std::make_shared<CommCall>(std::move(comm), kind, op, root)) {}

  std::shared_ptr<const Call> bind(Device device) const override {
    if (device != comm_->device())
      throw InvalidArgument(name_ + ": its communicator (rank " + std::to_string(comm_->rank()) +
                            " of " + std::to_string(comm_->size()) + ", " + comm_->kind() +
                            ") lives on " + comm_->device().str() + ", but the call runs on " +
                            device.str() +
                            ": a collective runs on its communicator's device (make the "
                            "communicator for that device, or build there)");
    return call_;
  }

 private:
  std::string name_;
  std::shared_ptr<CommImpl> comm_;
  std::shared_ptr<const CommCall> call_;
};

std::string label(Collective kind, ReduceOp op, int root) {
  std::string s = "comm." + std::string(detail::collective_name(kind));
  if (reduces(kind)) s += "." + std::string(reduce_op_name(op));
  if (kind == Collective::broadcast) s += ".root" + std::to_string(root);
  return s;
}

Kernel make(const Communicator& comm, Collective kind, ReduceOp op, int root) {
  const std::string name = label(kind, op, root);
  if (!comm.defined())
    throw InvalidArgument(name +
                          ": argument 'comm' is an empty Communicator (make one with "
                          "comm::cpu_group or comm::nccl)");
  const int k = comm.size();
  if (kind == Collective::broadcast && (root < 0 || root >= k))
    throw InvalidArgument(name + ": argument 'root' is " + std::to_string(root) + ", outside [0, " +
                          std::to_string(k) + ") for a group of " + std::to_string(k) + " ranks");
  KernelDef def;
  def.name = name;
  def.arrays = {{"x", Access::read}, {"out", Access::write}};
  // Element i of out depends only on element i of this rank's x (and of the other ranks'): an
  // all_reduce or broadcast may write x in place. The others move rows.
  def.per_sample = kind == Collective::all_reduce || kind == Collective::broadcast;
  def.infer = [name, kind, op, k](const std::vector<ArrayMeta>& in,
                                  const std::vector<ScalarArg>&) -> std::vector<ArrayMeta> {
    const ArrayMeta& x = in[0];
    const std::string dt(dtype_name(x.dtype));
    if (reduces(kind)) {
      if (!detail::collective_dtype(x.dtype))
        throw InvalidArgument(name + ": argument 'x' is " + dt +
                              "; a reduction takes f32, f64, f16, bf16, i32 or i64");
      if (!detail::reduce_op_serves(op, x.dtype))
        throw InvalidArgument(name + ": argument 'x' is " + dt +
                              "; avg takes a floating dtype (f32, f64, f16, bf16)");
    }
    if ((kind == Collective::reduce_scatter || kind == Collective::all_gather) && x.shape.empty())
      throw InvalidArgument(name + ": argument 'x' is a scalar " + dt + shape_str(x.shape) +
                            "; it needs a first dimension to split or join");
    Shape out = x.shape;
    if (kind == Collective::reduce_scatter) {
      if (x.shape[0] % k != 0)
        throw InvalidArgument(name + ": argument 'x' is " + dt + shape_str(x.shape) +
                              "; its first dimension must be a multiple of the " +
                              std::to_string(k) + " ranks");
      out[0] = x.shape[0] / k;
    } else if (kind == Collective::all_gather) {
      out[0] = x.shape[0] * k;
    }
    return {{out, x.dtype}};
  };
  def.binder = std::make_shared<CommBinder>(name, comm.impl(), kind, op, root);
  // Every rank must issue the group's collectives in one order; a graph would run independent
  // ones at once. The binder holds the communicator as long as the kernel lives.
  def.order_key = comm.impl().get();
  return Kernel(std::move(def));
}

}  // namespace

Kernel all_reduce(const Communicator& comm, ReduceOp op) {
  return make(comm, Collective::all_reduce, op, 0);
}
Kernel reduce_scatter(const Communicator& comm, ReduceOp op) {
  return make(comm, Collective::reduce_scatter, op, 0);
}
Kernel all_gather(const Communicator& comm) {
  return make(comm, Collective::all_gather, ReduceOp::sum, 0);
}
Kernel broadcast(const Communicator& comm, int root) {
  return make(comm, Collective::broadcast, ReduceOp::sum, root);
}

}  // namespace eagle::comm
