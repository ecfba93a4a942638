#include "eagle/kernel/tape.hpp"

#include <string>

#include "eagle/core/error.hpp"
#include "eagle/core/shape.hpp"
#include "kernel/tape_impl.hpp"

namespace eagle::kernels {

namespace {

using detail::TapeRoles;

template <TapeRoles const& roles, class Word>
void tape_cpu(const KernelArgs& a, const ThreadTeam&) {
  detail::tape_copy<Word>(a, roles, 0, 1);
}

template <TapeRoles const& roles>
CpuFn cpu_of(std::size_t bytes) {
  switch (bytes) {
    case 1:
      return &tape_cpu<roles, uint8_t>;
    case 2:
      return &tape_cpu<roles, uint16_t>;
    case 4:
      return &tape_cpu<roles, uint32_t>;
    case 8:
      return &tape_cpu<roles, uint64_t>;
    default:
      return nullptr;
  }
}

void check_index(const std::string& kernel, const ArrayMeta& index) {
  if (index.dtype != DType::u32 || checked_numel(index.shape, kernel) != 1)
    throw InvalidArgument("kernel " + kernel +
                          ": argument 'index' must be a one-cell u32 array, got " +
                          std::string(dtype_name(index.dtype)) + shape_str(index.shape));
}

// The row shape of a tape [cap, ...].
Shape row_of(const std::string& kernel, const ArrayMeta& tape) {
  if (tape.shape.empty())
    throw InvalidArgument("kernel " + kernel + ": argument 'tape' must have a turn dimension");
  return Shape(tape.shape.begin() + 1, tape.shape.end());
}

template <TapeRoles const& roles>
Kernel tape_kernel(const std::string& name, std::vector<ArrayParam> arrays) {
  KernelDef d;
  d.name = name;
  d.arrays = std::move(arrays);
  d.per_sample = false;  // the index cell chooses the row
  d.no_gradient = true;  // bookkeeping of the reverse pass: never differentiated
  d.infer = [name](const std::vector<ArrayMeta>& in, const std::vector<ScalarArg>&) {
    check_index(name, in[1]);
    if (roles.to_tape) {  // src, index, tape
      const Shape row = row_of(name, in[2]);
      if (row != in[0].shape || in[0].dtype != in[2].dtype)
        throw InvalidArgument("kernel " + name + ": argument 'tape' is " +
                              std::string(dtype_name(in[2].dtype)) + shape_str(in[2].shape) +
                              "; it must be [cap] + src's shape " + shape_str(in[0].shape) +
                              " in src's dtype " + std::string(dtype_name(in[0].dtype)));
      return std::vector<ArrayMeta>{};
    }
    return std::vector<ArrayMeta>{{row_of(name, in[0]), in[0].dtype}};  // tape, index -> out
  };
  d.select = [name](const std::vector<DType>& dtypes) {
    KernelImpl impl;
    const std::size_t bytes = itemsize(dtypes[0]);
    impl.cpu = cpu_of<roles>(bytes);
    if (!impl.cpu)
      throw NotSupported("kernel " + name + ": dtype " + std::string(dtype_name(dtypes[0])) +
                         " is not served (elements of 1, 2, 4 or 8 bytes)");
    impl.cuda_function = detail::tape_cuda_function(roles.to_tape, bytes);
    impl.cuda_shape = impl.cuda_function ? &detail::tape_cuda_shape : nullptr;
    return impl;
  };
  return Kernel(std::move(d));
}

}  // namespace

const Kernel& tape_write() {
  static const Kernel k = tape_kernel<detail::kTapeWrite>(
      "tape_write",
      {{"src", Access::read, true}, {"index", Access::read}, {"tape", Access::read_write}});
  return k;
}

const Kernel& tape_read() {
  static const Kernel k = tape_kernel<detail::kTapeRead>(
      "tape_read", {{"tape", Access::read}, {"index", Access::read}, {"out", Access::write}});
  return k;
}

}  // namespace eagle::kernels
