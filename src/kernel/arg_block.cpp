#include "eagle/kernel/arg_block.hpp"

#include "eagle/core/error.hpp"
#include "eagle/core/shape.hpp"

namespace eagle {

ArgBlock::ArgBlock(int arrays, int scalars)
    : words_(args_block_bytes(arrays, scalars) / sizeof(uint64_t), 0),
      arrays_(arrays),
      scalars_(scalars) {
  // The counts sit after the scalars, as in KernelArgsN.
  auto* counts = reinterpret_cast<int32_t*>(reinterpret_cast<char*>(words_.data()) +
                                            args_counts_offset(arrays, scalars));
  counts[0] = arrays;
  counts[1] = scalars;
}

ArrayArg make_array_arg(void* data, const Shape& shape, DType dtype, const Shape& strides,
                        const std::string& what) {
  if (shape.size() > static_cast<std::size_t>(kMaxDims))
    throw InvalidArgument(what + " has " + std::to_string(shape.size()) + " dims " +
                          shape_str(shape) + "; a kernel argument holds at most " +
                          std::to_string(kMaxDims));
  ArrayArg arg{};
  arg.data = data;
  arg.numel = checked_numel(shape, what);
  arg.ndim = static_cast<int32_t>(shape.size());
  arg.dtype = static_cast<int32_t>(dtype);
  const Shape dense = strides.empty() ? contiguous_strides(shape) : Shape{};
  const Shape& s = strides.empty() ? dense : strides;
  for (int i = 0; i < kMaxDims; ++i) {
    const bool used = i < arg.ndim;
    arg.dims[i] = used ? shape[static_cast<std::size_t>(i)] : 1;
    arg.strides[i] = used ? s[static_cast<std::size_t>(i)] : 0;
  }
  return arg;
}

ArrayArg make_array_arg(const Array& a, const std::string& what) {
  if (!a.defined()) throw InvalidArgument(what + " is undefined (a default-constructed Array)");
  return make_array_arg(a.data(), a.shape(), a.dtype(), a.strides(), what);
}

}  // namespace eagle
