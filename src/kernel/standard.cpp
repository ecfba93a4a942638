// Definitions of the standard kernels: parameters, shape rules and implementation choice.
#include "eagle/kernel/standard.hpp"

#include "eagle/core/error.hpp"
#include "eagle/core/shape.hpp"
#include "kernel/standard_impl.hpp"

namespace eagle::kernels {

namespace {

using detail::EwOp;
using detail::ReduceOp;

std::string arg_name(const std::string& kernel, const std::string& param) {
  return "kernel " + kernel + ": argument '" + param + "'";
}

// Every input has the first input's shape and (except `exempt`) dtype; the output is like it.
std::function<std::vector<ArrayMeta>(const std::vector<ArrayMeta>&, const std::vector<ScalarArg>&)>
same_shape(const std::string& kernel, const std::vector<std::string>& names, int like,
           int dtype_exempt = -1) {
  return [=](const std::vector<ArrayMeta>& in, const std::vector<ScalarArg>&) {
    const ArrayMeta& ref = in[like];
    for (std::size_t i = 0; i < in.size(); ++i) {
      if (in[i].shape != ref.shape)
        throw InvalidArgument(arg_name(kernel, names[i]) + " has shape " + shape_str(in[i].shape) +
                              " but '" + names[like] + "' has " + shape_str(ref.shape) +
                              "; elementwise arguments must have the same shape");
      if (static_cast<int>(i) != dtype_exempt && in[i].dtype != ref.dtype)
        throw InvalidArgument(arg_name(kernel, names[i]) + " has dtype " +
                              std::string(dtype_name(in[i].dtype)) + " but '" + names[like] +
                              "' has " + std::string(dtype_name(ref.dtype)) +
                              "; elementwise arguments must have the same dtype");
    }
    if (dtype_exempt >= 0 && in[dtype_exempt].dtype != DType::boolean &&
        in[dtype_exempt].dtype != DType::u8)
      throw InvalidArgument(arg_name(kernel, names[dtype_exempt]) + " must be bool or u8, got " +
                            std::string(dtype_name(in[dtype_exempt].dtype)));
    return std::vector<ArrayMeta>{ref};
  };
}

[[noreturn]] void decline(const std::string& kernel, DType d, const char* served) {
  throw NotSupported("kernel " + kernel + ": dtype " + std::string(dtype_name(d)) +
                     " is not served (serves " + served + ")");
}

Kernel elementwise(EwOp op, const std::string& name, std::vector<ArrayParam> arrays,
                   std::vector<ScalarParam> scalars, int like, int dtype_exempt = -1) {
  std::vector<std::string> input_names;
  for (const auto& p : arrays)
    if (reads(p.access)) input_names.push_back(p.name);
  KernelDef def;
  def.name = name;
  def.arrays = std::move(arrays);
  def.scalars = std::move(scalars);
  def.per_sample = true;
  def.reduces = false;
  if (op == EwOp::fill) {
    // The output's shape is the caller's choice: it comes from buffer=.
    def.infer = [](const std::vector<ArrayMeta>&, const std::vector<ScalarArg>&) {
      return std::vector<ArrayMeta>{ArrayMeta{{-1}, DType::f32}};
    };
  } else {
    def.infer = same_shape(name, input_names, like, dtype_exempt);
  }
  const int out = detail::ew_output_index(op);
  def.select = [op, name, out](const std::vector<DType>& dtypes) {
    KernelImpl impl;
    impl.cpu = detail::cpu_elementwise(op, dtypes[out]);
    if (!impl.cpu) decline(name, dtypes[out], "f64, f32, f16, bf16, i64, i32, u32");
    detail::attach_cuda_elementwise(impl, op, dtypes[out]);
    return impl;
  };
  return Kernel(std::move(def));
}

// A kernel reading one cell of every input after the first for each element: per-sample it is
// not (element i depends on cell 0), but it reduces nothing. `out_like_first`: the output has the
// first input's shape and dtype; otherwise its shape comes from buffer= (broadcast).
Kernel cell_elementwise(EwOp op, const std::string& name, std::vector<ArrayParam> arrays,
                        bool out_like_first) {
  std::vector<std::string> input_names;
  for (const auto& p : arrays)
    if (reads(p.access)) input_names.push_back(p.name);
  KernelDef def;
  def.name = name;
  def.arrays = std::move(arrays);
  def.per_sample = false;
  def.reduces = false;
  def.infer = [name, input_names, out_like_first](const std::vector<ArrayMeta>& in,
                                                  const std::vector<ScalarArg>&) {
    for (std::size_t i = out_like_first ? 1 : 0; i < in.size(); ++i) {
      if (checked_numel(in[i].shape, "kernel " + name) != 1)
        throw InvalidArgument(arg_name(name, input_names[i]) + " must hold one element, got " +
                              shape_str(in[i].shape));
      if (in[i].dtype != in[0].dtype)
        throw InvalidArgument(arg_name(name, input_names[i]) + " has dtype " +
                              std::string(dtype_name(in[i].dtype)) + " but '" + input_names[0] +
                              "' has " + std::string(dtype_name(in[0].dtype)));
    }
    return std::vector<ArrayMeta>{out_like_first ? in[0] : ArrayMeta{{-1}, in[0].dtype}};
  };
  const int out = detail::ew_output_index(op);
  def.select = [op, name, out](const std::vector<DType>& dtypes) {
    for (int i = 0; i < out; ++i)
      if (dtypes[static_cast<std::size_t>(i)] != dtypes[static_cast<std::size_t>(out)])
        throw NotSupported("kernel " + name + ": the output's dtype " +
                           std::string(dtype_name(dtypes[static_cast<std::size_t>(out)])) +
                           " differs from the inputs' " +
                           std::string(dtype_name(dtypes[static_cast<std::size_t>(i)])));
    KernelImpl impl;
    impl.cpu = detail::cpu_elementwise(op, dtypes[static_cast<std::size_t>(out)]);
    if (!impl.cpu)
      decline(name, dtypes[static_cast<std::size_t>(out)], "f64, f32, f16, bf16, i64, i32, u32");
    detail::attach_cuda_elementwise(impl, op, dtypes[static_cast<std::size_t>(out)]);
    return impl;
  };
  return Kernel(std::move(def));
}

Kernel reduction(ReduceOp op, const std::string& name) {
  KernelDef def;
  def.name = name;
  def.arrays = {{"x", Access::read}, {"out", Access::write}};
  def.per_sample = false;
  def.reduces = true;
  def.infer = [](const std::vector<ArrayMeta>& in, const std::vector<ScalarArg>&) {
    return std::vector<ArrayMeta>{ArrayMeta{{1}, in[0].dtype}};
  };
  def.select = [op, name](const std::vector<DType>& dtypes) {
    KernelImpl impl;
    impl.cpu = detail::cpu_reduce(op, dtypes[0]);
    if (!impl.cpu || dtypes[1] != dtypes[0]) decline(name, dtypes[0], "f64, f32, i64, i32");
    detail::attach_cuda_reduce(impl, op, dtypes[0]);
    return impl;
  };
  return Kernel(std::move(def));
}

}  // namespace

const Kernel& fill() {
  static const Kernel k = elementwise(EwOp::fill, "fill", {{"out", Access::write}}, {{"value"}}, 0);
  return k;
}
const Kernel& copy() {
  static const Kernel k =
      elementwise(EwOp::copy, "copy", {{"x", Access::read}, {"out", Access::write}}, {}, 0);
  return k;
}
const Kernel& scale() {
  static const Kernel k = elementwise(
      EwOp::scale, "scale", {{"x", Access::read}, {"out", Access::write}}, {{"alpha"}}, 0);
  return k;
}
const Kernel& axpy() {
  static const Kernel k = elementwise(
      EwOp::axpy, "axpy", {{"x", Access::read}, {"y", Access::read}, {"out", Access::write}},
      {{"alpha"}}, 0);
  return k;
}
const Kernel& add() {
  static const Kernel k = elementwise(
      EwOp::add, "add", {{"a", Access::read}, {"b", Access::read}, {"out", Access::write}}, {}, 0);
  return k;
}
const Kernel& mul() {
  static const Kernel k = elementwise(
      EwOp::mul, "mul", {{"a", Access::read}, {"b", Access::read}, {"out", Access::write}}, {}, 0);
  return k;
}
const Kernel& where() {
  static const Kernel k = elementwise(
      EwOp::where, "where",
      {{"cond", Access::read}, {"a", Access::read}, {"b", Access::read}, {"out", Access::write}},
      {}, 1, 0);
  return k;
}
const Kernel& sum() {
  static const Kernel k = reduction(ReduceOp::sum, "sum");
  return k;
}
const Kernel& max() {
  static const Kernel k = reduction(ReduceOp::max, "max");
  return k;
}

const Kernel& broadcast() {
  static const Kernel k = cell_elementwise(EwOp::broadcast, "broadcast",
                                           {{"x", Access::read}, {"out", Access::write}}, false);
  return k;
}
const Kernel& equal_mask() {
  static const Kernel k = cell_elementwise(
      EwOp::equal_mask, "equal_mask",
      {{"x", Access::read}, {"value", Access::read}, {"out", Access::write}}, true);
  return k;
}
const Kernel& mul_div() {
  static const Kernel k = cell_elementwise(
      EwOp::mul_div, "mul_div",
      {{"x", Access::read}, {"num", Access::read}, {"den", Access::read}, {"out", Access::write}},
      true);
  return k;
}

}  // namespace eagle::kernels
