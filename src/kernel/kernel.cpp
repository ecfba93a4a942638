#include "eagle/kernel/kernel.hpp"

#include <cmath>
#include <limits>
#include <set>

#include "eagle/core/convert.hpp"
#include "eagle/core/error.hpp"
#include "eagle/core/shape.hpp"

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
  if (def.arrays.empty()) throw InvalidArgument(who + ": must have at least one array parameter");
  if (def.binder && !def.scalars.empty())
    throw InvalidArgument(who + ": a planned call takes no scalar parameters");
  if (def.binder && !def.select)
    def.select = [](const std::vector<DType>&) { return KernelImpl{}; };
  std::set<std::string> names;
  for (const auto& p : def.arrays) {
    if (p.name.empty()) throw InvalidArgument(who + ": an array parameter has no name");
    if (!names.insert(p.name).second)
      throw InvalidArgument(who + ": parameter name '" + p.name + "' is used twice");
  }
  for (const auto& p : def.scalars) {
    if (p.name.empty()) throw InvalidArgument(who + ": a scalar parameter has no name");
    if (!names.insert(p.name).second)
      throw InvalidArgument(who + ": parameter name '" + p.name + "' is used twice");
  }
  if (!def.infer) throw InvalidArgument(who + ": infer (the shape rule) must be set");
  if (!def.select) throw InvalidArgument(who + ": select (the implementation choice) must be set");
  if (def.no_gradient && def.derivative)
    throw InvalidArgument(who + ": declares no_gradient and a derivative rule; choose one");
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

std::vector<ArrayMeta> Kernel::infer(const std::vector<ArrayMeta>& inputs,
                                     const std::vector<ScalarArg>& scalars) const {
  std::vector<ArrayMeta> out = def_->infer(inputs, scalars);
  const std::string who = "kernel " + def_->name + ": infer (the shape rule)";
  if (static_cast<int>(out.size()) != num_outputs())
    throw InvalidArgument(who + " returned " + std::to_string(out.size()) +
                          " outputs, but the kernel has " + std::to_string(num_outputs()) +
                          " write-only parameters; it must return one shape per output");
  std::size_t o = 0;
  for (const auto& p : def_->arrays) {
    if (reads(p.access)) continue;
    const ArrayMeta& m = out[o++];
    if (m.shape == Shape{-1}) continue;  // given by the caller's array
    checked_nbytes(m.shape, m.dtype, who + ": output '" + p.name + "'");
  }
  return out;
}

KernelImpl Kernel::select(const std::vector<DType>& dtypes) const {
  KernelImpl impl = def_->select(dtypes);
  const CudaFunction& f = impl.cuda_function;
  const int arrays = static_cast<int>(def_->arrays.size());
  const int scalars = static_cast<int>(def_->scalars.size());
  if (f && (f.arrays != arrays || f.scalars != scalars))
    throw InvalidArgument("kernel " + def_->name + ": its CUDA function takes KernelArgsN<" +
                          std::to_string(f.arrays) + ", " + std::to_string(f.scalars) +
                          "> but the kernel declares " + std::to_string(arrays) + " arrays and " +
                          std::to_string(scalars) + " scalars");
  if (f && (!f.resolve || !impl.cuda_shape))
    throw InvalidArgument("kernel " + def_->name +
                          ": a CUDA function needs its resolver (use eagle::cuda_function) and "
                          "cuda_shape");
  return impl;
}

ScalarArg Scalar::as(ScalarKind kind) const {
  ScalarArg out;
  if (kind == ScalarKind::integer) {
    out.i = integer_ ? value_.i : saturating_cast<int64_t>(value_.f);
  } else {
    out.f = integer_ ? static_cast<double>(value_.i) : value_.f;
  }
  return out;
}

}  // namespace eagle
