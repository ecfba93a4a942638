#include "eagle/kernel/kernel.hpp"

#include <algorithm>
#include <set>

#include "eagle/core/error.hpp"
#include "eagle/core/stream.hpp"
#include "eagle/kernel/thread_team.hpp"
#include "kernel/cuda_launch.hpp"

namespace eagle {

std::string_view access_name(Access access) {
  switch (access) {
    case Access::read:
      return "read";
    case Access::write:
      return "write";
    case Access::read_write:
      return "read-write";
  }
  return "?";
}

Kernel::Kernel(KernelDef def) {
  const std::string who = "Kernel '" + def.name + "'";
  if (def.name.empty()) throw InvalidArgument("Kernel: name must not be empty");
  const int max_arrays = def.binder ? kMaxBoundCallArrays : kMaxKernelArrays;
  if (def.arrays.empty() || def.arrays.size() > static_cast<std::size_t>(max_arrays))
    throw InvalidArgument(who + ": must have 1 to " + std::to_string(max_arrays) +
                          " array parameters, has " + std::to_string(def.arrays.size()));
  if (def.binder && !def.scalars.empty())
    throw InvalidArgument(who + ": a planned call takes no scalar parameters");
  if (def.binder && !def.select)
    def.select = [](const std::vector<DType>&) { return KernelImpl{}; };
  if (def.scalars.size() > static_cast<std::size_t>(kMaxKernelScalars))
    throw InvalidArgument(who + ": at most " + std::to_string(kMaxKernelScalars) +
                          " scalar parameters, has " + std::to_string(def.scalars.size()));
  std::set<std::string> names;
  for (const auto& p : def.arrays)
    if (!names.insert(p.name).second)
      throw InvalidArgument(who + ": parameter name '" + p.name + "' is used twice");
  for (const auto& p : def.scalars)
    if (!names.insert(p.name).second)
      throw InvalidArgument(who + ": parameter name '" + p.name + "' is used twice");
  if (!def.infer) throw InvalidArgument(who + ": infer (the shape rule) must be set");
  if (!def.select) throw InvalidArgument(who + ": select (the implementation choice) must be set");
  def_ = std::make_shared<const KernelDef>(std::move(def));
}

int Kernel::num_inputs() const {
  int n = 0;
  for (const auto& p : def_->arrays) n += reads(p.access);
  return n;
}

int Kernel::num_outputs() const {
  return static_cast<int>(def_->arrays.size()) - num_inputs();
}

ScalarArg Scalar::as(ScalarKind kind) const {
  ScalarArg out;
  if (kind == ScalarKind::integer) {
    out.i = integer_ ? value_.i : static_cast<int64_t>(value_.f);
  } else {
    out.f = integer_ ? static_cast<double>(value_.i) : value_.f;
  }
  return out;
}

ArrayArg make_array_arg(void* data, const Shape& shape, DType dtype) {
  ArrayArg arg{};
  arg.data = data;
  arg.numel = 1;
  for (int64_t d : shape) arg.numel *= d;
  arg.ndim = static_cast<int32_t>(shape.size());
  arg.dtype = static_cast<int32_t>(dtype);
  for (int i = 0; i < kMaxKernelDims; ++i) arg.dims[i] = 1;
  // Dims past the last slot fold into it, so dims[] always multiplies out to numel.
  for (std::size_t i = 0; i < shape.size(); ++i)
    arg.dims[std::min<std::size_t>(i, kMaxKernelDims - 1)] *= shape[i];
  return arg;
}

ArrayArg make_array_arg(const Array& a, const std::string& what) {
  if (!a.is_contiguous())
    throw InvalidArgument(what + " must be contiguous (row-major), got strides " +
                          shape_str(a.strides()) + " for shape " + shape_str(a.shape()));
  return make_array_arg(a.data(), a.shape(), a.dtype());
}

namespace {

// Checks the call against the kernel and fills `args`; returns the chosen implementation and
// the metas of the outputs. Nothing is allocated or launched here.
struct PreparedCall {
  KernelImpl impl;
  std::vector<ArrayMeta> outputs;
};

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
  for (const auto& a : inputs) metas.push_back({a.shape(), a.dtype()});
  std::vector<ScalarArg> sargs;
  for (std::size_t i = 0; i < scalars.size(); ++i)
    sargs.push_back(scalars[i].as(def.scalars[i].kind));
  PreparedCall call;
  call.outputs = def.infer(metas, sargs);
  if (outputs) {
    if (outputs->size() != call.outputs.size())
      throw InvalidArgument(who + ": expects " + std::to_string(call.outputs.size()) +
                            " outputs, got " + std::to_string(outputs->size()));
    for (std::size_t i = 0; i < outputs->size(); ++i) {
      const ArrayMeta& want = call.outputs[i];
      const Array& got = (*outputs)[i];
      const bool free_shape = want.shape == Shape{-1};
      if ((!free_shape && got.shape() != want.shape) || (!free_shape && got.dtype() != want.dtype))
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
    dtypes.push_back(reads(p.access) ? inputs[in++].dtype() : call.outputs[out++].dtype);
  call.impl = def.select(dtypes);
  return call;
}

void issue(const Kernel& kernel, const KernelImpl& impl, const std::vector<Array>& inputs,
           const std::vector<Scalar>& scalars, const std::vector<Array>& outputs,
           const Stream& stream, const ThreadTeam& team) {
  const KernelDef& def = kernel.def();
  KernelArgs args{};
  std::vector<void*> call_data;  // a planned call's addresses (it takes more arrays than args)
  std::size_t in = 0, out = 0;
  for (std::size_t i = 0; i < def.arrays.size(); ++i) {
    const Array& a = reads(def.arrays[i].access) ? inputs[in++] : outputs[out++];
    if (a.device() != stream.device())
      throw InvalidArgument("kernel " + def.name + ": argument '" + def.arrays[i].name +
                            "' is on " + a.device().str() + " but the stream is on " +
                            stream.device().str());
    // The message is built only on failure: this is the eager launch path.
    if (!a.is_contiguous())
      make_array_arg(a, "kernel " + def.name + ": argument '" + def.arrays[i].name + "'");
    if (def.binder) {
      call_data.push_back(a.data());
    } else {
      args.arrays[i] = make_array_arg(a.data(), a.shape(), a.dtype());
    }
  }
  if (def.binder) {
    def.binder->bind(stream.device())->run(call_data.data(), nullptr, stream.native(), &team);
    return;
  }
  for (std::size_t i = 0; i < scalars.size(); ++i)
    args.scalars[i] = scalars[i].as(def.scalars[i].kind);
  args.num_arrays = static_cast<int32_t>(def.arrays.size());
  args.num_scalars = static_cast<int32_t>(scalars.size());
  if (stream.device().is_cpu()) {
    impl.cpu(args, team);
    return;
  }
  if (!impl.has_cuda())
    throw NotSupported("kernel " + def.name + " has no CUDA implementation for these dtypes");
  if (impl.cuda_workspace && impl.cuda_workspace(args) > 0) {
    // Eager use of a captured sequence: a temporary workspace, freed once the work is done.
    Array workspace =
        Array::empty({static_cast<int64_t>(impl.cuda_workspace(args))}, DType::u8, stream.device());
    detail::cuda_issue(impl, args, stream.device(), stream.native(), workspace.data());
    stream.synchronize();
    return;
  }
  detail::cuda_issue(impl, args, stream.device(), stream.native(), nullptr);
}

}  // namespace

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
