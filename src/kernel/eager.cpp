// Eager use of a kernel, without a graph: the same checks recording makes, then one Call run
// on the caller's stream with a context the stream provides.
#include <cstring>
#include <map>
#include <string>
#include <utility>

#include "eagle/core/error.hpp"
#include "eagle/core/shape.hpp"
#include "eagle/core/stream.hpp"
#include "eagle/kernel/kernel.hpp"
#include "eagle/kernel/thread_team.hpp"
#include "kernel/kernel_call.hpp"
#include "util/cuda_check.hpp"

namespace eagle {

namespace {

struct PreparedCall {
  KernelImpl impl;
  std::vector<ArrayMeta> outputs;
};

std::string param_what(const KernelDef& def, std::size_t i) {
  return "kernel " + def.name + ": argument '" + def.arrays[i].name + "'";
}

PreparedCall prepare(const Kernel& kernel, const std::vector<Array>& inputs,
                     const std::vector<Scalar>& scalars, const std::vector<Array>* outputs) {
  const KernelDef& def = kernel.def();
  const std::string who = "kernel " + def.name;
  if (static_cast<int>(inputs.size()) != kernel.num_inputs())
    throw InvalidArgument(who + ": expects " + std::to_string(kernel.num_inputs()) +
                          " array arguments, got " + std::to_string(inputs.size()));
  if (scalars.size() != def.scalars.size())
    throw InvalidArgument(who + ": expects " + std::to_string(def.scalars.size()) +
                          " scalar arguments, got " + std::to_string(scalars.size()));
  std::vector<ArrayMeta> metas;
  {
    std::size_t in = 0;
    for (std::size_t i = 0; i < def.arrays.size(); ++i) {
      if (!reads(def.arrays[i].access)) continue;
      const Array& a = inputs[in++];
      if (!a.defined())
        throw InvalidArgument(param_what(def, i) + " is undefined (a default-constructed Array)");
      metas.push_back({a.shape(), a.dtype()});
    }
  }
  std::vector<ScalarArg> sargs;
  for (std::size_t i = 0; i < scalars.size(); ++i)
    sargs.push_back(scalars[i].as(def.scalars[i].kind));
  PreparedCall call;
  call.outputs = kernel.infer(metas, sargs);
  if (outputs) {
    if (outputs->size() != call.outputs.size())
      throw InvalidArgument(who + ": expects " + std::to_string(call.outputs.size()) +
                            " outputs, got " + std::to_string(outputs->size()));
    for (std::size_t i = 0; i < outputs->size(); ++i) {
      const ArrayMeta& want = call.outputs[i];
      const Array& got = (*outputs)[i];
      if (!got.defined())
        throw InvalidArgument(who + ": output " + std::to_string(i) +
                              " is undefined (a default-constructed Array)");
      const bool free_shape = want.shape == Shape{-1};
      if (!free_shape && (got.shape() != want.shape || got.dtype() != want.dtype))
        throw InvalidArgument(who + ": output " + std::to_string(i) + " must be " +
                              std::string(dtype_name(want.dtype)) + shape_str(want.shape) +
                              ", got " + got.describe());
      call.outputs[i] = {got.shape(), got.dtype()};
    }
  }
  for (const auto& o : call.outputs)
    if (o.shape == Shape{-1})
      throw InvalidArgument(who +
                            ": the output's shape is not determined by the inputs; pass the "
                            "output array (launch_into, or buffer= when recording)");
  std::vector<DType> dtypes;
  std::size_t in = 0, out = 0;
  for (const auto& p : def.arrays)
    dtypes.push_back(reads(p.access) ? metas[in++].dtype : call.outputs[out++].dtype);
  call.impl = kernel.select(dtypes);
  return call;
}

bool same_view(const Array& a, const Array& b) {
  return a.data() == b.data() && a.shape() == b.shape() && a.strides() == b.strides() &&
         a.dtype() == b.dtype();
}

// What recording refuses, refused here too: an argument on another device, a strided array
// for a parameter that takes contiguous ones, a write into read-only memory, and a written
// argument overlapping another one unless it is the very same view of a per-sample kernel.
void check_each_argument(const KernelDef& def, const std::vector<const Array*>& args,
                         Device device) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const Array& a = *args[i];
    const ArrayParam& p = def.arrays[i];
    if (a.device() != device)
      throw InvalidArgument(param_what(def, i) + " is on " + a.device().str() +
                            " but the stream is on " + device.str());
    if (!p.strided && !a.is_contiguous())
      throw InvalidArgument(param_what(def, i) + " must be contiguous (row-major), got strides " +
                            shape_str(a.strides()) + " for shape " + shape_str(a.shape()) +
                            "; the kernel does not declare that it takes strided arrays");
    if (writes(p.access) && a.read_only())
      throw InvalidArgument(param_what(def, i) + " is written but the array is read-only");
    // Two elements at one address (a stride 0): one of the writes would be lost.
    if (writes(p.access) && may_overlap(a.shape(), a.strides()))
      throw InvalidArgument(param_what(def, i) + " is written but its strides " +
                            shape_str(a.strides()) + " give several elements one address");
  }
}

void check_no_overlaps(const KernelDef& def, const std::vector<const Array*>& args) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (!writes(def.arrays[i].access) || args[i]->nbytes() == 0) continue;
    const auto [lo, hi] = args[i]->byte_span();
    for (std::size_t j = 0; j < args.size(); ++j) {
      if (j == i || args[j]->nbytes() == 0) continue;
      const auto [olo, ohi] = args[j]->byte_span();
      if (!(lo < ohi && olo < hi)) continue;
      const bool both_write = writes(def.arrays[j].access);
      if (same_view(*args[i], *args[j]) && def.per_sample && !both_write) continue;
      if (both_write && j < i) continue;  // reported once, from the first of the two
      throw InvalidArgument(
          param_what(def, i) + " (" + std::string(access_name(def.arrays[i].access)) +
          ") overlaps argument '" + def.arrays[j].name + "' (" +
          std::string(access_name(def.arrays[j].access)) + ")" +
          (same_view(*args[i], *args[j]) && !def.per_sample
               ? "; only a per-sample kernel may update an array in place"
               : "; a kernel may write in place only over exactly the same view"));
    }
  }
}

void issue(const Kernel& kernel, const KernelImpl& impl, const std::vector<Array>& inputs,
           const std::vector<Scalar>& scalars, const std::vector<Array>& outputs,
           const Stream& stream, const ThreadTeam& team) {
  const KernelDef& def = kernel.def();
  std::vector<const Array*> args;
  std::size_t in = 0, out = 0;
  for (const auto& p : def.arrays)
    args.push_back(reads(p.access) ? &inputs[in++] : &outputs[out++]);
  check_each_argument(def, args, stream.device());
  check_no_overlaps(def, args);
  ArgBlock block(static_cast<int>(def.arrays.size()), static_cast<int>(def.scalars.size()));
  for (std::size_t i = 0; i < args.size(); ++i)
    block.array(static_cast<int>(i)) = make_array_arg(*args[i], param_what(def, i));
  for (std::size_t i = 0; i < scalars.size(); ++i)
    block.scalar(static_cast<int>(i)) = scalars[i].as(def.scalars[i].kind);
  if (def.binder) {
    run_on_stream(*def.binder->bind(stream.device()), block, stream, &team);
    return;
  }
  if (stream.device().is_cpu() && !impl.has_cpu())
    throw NotSupported("kernel " + def.name + " has no CPU implementation for its dtypes");
  if (stream.device().is_cuda() && !impl.has_cuda())
    throw NotSupported("kernel " + def.name + " has no CUDA implementation for its dtypes");
  run_on_stream(KernelCall(impl, def.name), block, stream, &team);
}

#ifdef EAGLE_HAVE_CUDA
// A workspace for one eager call, allocated and freed in the stream's order (no wait).
class StreamWorkspace {
 public:
  StreamWorkspace(const Stream& stream, std::size_t bytes)
      : stream_(static_cast<cudaStream_t>(stream.native())), device_(stream.device().ordinal()) {
    detail::DeviceGuard guard(device_);
    EAGLE_CUDA_CHECK(cudaMallocAsync(&data_, bytes, stream_));
  }
  ~StreamWorkspace() {
    detail::DeviceGuard guard(device_);
    cudaFreeAsync(data_, stream_);
  }
  StreamWorkspace(const StreamWorkspace&) = delete;
  StreamWorkspace& operator=(const StreamWorkspace&) = delete;
  void* data() const { return data_; }

 private:
  cudaStream_t stream_;
  int device_;
  void* data_ = nullptr;
};
#endif

}  // namespace

std::shared_ptr<void> eager_handle(const Library& library, const Stream& stream) {
  const auto make = [&] {
    return std::shared_ptr<void>(library.create(stream.device(), stream.native()), library.destroy);
  };
  if (!library.set_stream) return stream.cached(&library, make);
  // Destroyed when the thread ends (the main thread's before CUDA's own teardown at exit).
  thread_local std::map<std::pair<const Library*, std::string>, std::shared_ptr<void>> handles;
  std::shared_ptr<void>& h = handles[{&library, stream.device().str()}];
  if (!h) h = make();
  library.set_stream(h.get(), stream.native());
  return h;
}

void run_on_stream(const Call& call, const ArgBlock& args, const Stream& stream,
                   const ThreadTeam* team) {
  CallContext ctx = CallContext::on(stream, team);
  std::shared_ptr<void> handle;
  if (const Library* library = call.library()) {
    handle = eager_handle(*library, stream);
    ctx.handle = handle.get();
  }
  const std::size_t bytes = call.workspace_bytes(args, stream.device());
  ctx.workspace_bytes = bytes;
  if (bytes == 0) {
    call.run(args, ctx);
    return;
  }
  if (stream.device().is_cpu()) {
    std::vector<std::byte> workspace(bytes);
    ctx.workspace = workspace.data();
    call.run(args, ctx);
    return;
  }
#ifdef EAGLE_HAVE_CUDA
  StreamWorkspace workspace(stream, bytes);
  ctx.workspace = workspace.data();
  call.run(args, ctx);
#else
  throw NotSupported("this build of eagle has no CUDA support");
#endif
}

std::vector<Array> launch(const Kernel& kernel, const std::vector<Array>& inputs,
                          const std::vector<Scalar>& scalars, const Stream& stream,
                          const ThreadTeam& team) {
  PreparedCall call = prepare(kernel, inputs, scalars, nullptr);
  std::vector<Array> outputs;
  for (const auto& o : call.outputs)
    outputs.push_back(Array::empty(o.shape, o.dtype, stream.device()));
  issue(kernel, call.impl, inputs, scalars, outputs, stream, team);
  return outputs;
}

void launch_into(const Kernel& kernel, const std::vector<Array>& inputs,
                 const std::vector<Scalar>& scalars, const std::vector<Array>& outputs,
                 const Stream& stream, const ThreadTeam& team) {
  PreparedCall call = prepare(kernel, inputs, scalars, &outputs);
  issue(kernel, call.impl, inputs, scalars, outputs, stream, team);
}

}  // namespace eagle
