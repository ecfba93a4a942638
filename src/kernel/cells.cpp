#include "eagle/kernel/cells.hpp"

#include <string>

#include "eagle/core/error.hpp"
#include "kernel/cells_impl.hpp"

namespace eagle::kernels {

namespace {

using detail::CellOp;

template <CellOp op>
void cell_cpu(const KernelArgs& a, const ThreadTeam&) {
  detail::cell_apply<op>(a);
}

CudaLaunchShape one_thread(const KernelArgs&, const DeviceProperties&) {
  return {};
}

template <CellOp op>
Kernel cell_kernel(const std::string& name, std::vector<ArrayParam> arrays) {
  KernelDef d;
  d.name = name;
  d.arrays = std::move(arrays);
  d.per_sample = true;  // one sample: a cell may be updated in place
  d.infer = [name, params = d.arrays](const std::vector<ArrayMeta>& in,
                                      const std::vector<ScalarArg>&) {
    std::size_t i = 0;
    for (const auto& p : params) {
      if (!reads(p.access)) continue;
      if (in[i].dtype != DType::u32 || in[i].shape.size() > 1 ||
          (in[i].shape.size() == 1 && in[i].shape[0] != 1))
        throw InvalidArgument("kernel " + name + ": argument '" + p.name +
                              "' must be a one-cell u32 array, got " +
                              std::string(dtype_name(in[i].dtype)) + shape_str(in[i].shape));
      ++i;
    }
    return std::vector<ArrayMeta>{{{1}, DType::u32}};
  };
  d.no_gradient = true;  // cells decide control flow; nothing flows back through them
  d.select = [arrays = static_cast<int>(d.arrays.size())](const std::vector<DType>&) {
    KernelImpl impl;
    impl.cpu = &cell_cpu<op>;
    impl.cuda_function = detail::cell_cuda_function(op, arrays);
    impl.cuda_shape = impl.cuda_function ? &one_thread : nullptr;
    return impl;
  };
  return Kernel(std::move(d));
}

}  // namespace

const Kernel& cell_or() {
  static const Kernel k = cell_kernel<CellOp::any>(
      "cell_or", {{"a", Access::read}, {"b", Access::read}, {"out", Access::write}});
  return k;
}

const Kernel& cell_none() {
  static const Kernel k = cell_kernel<CellOp::none>(
      "cell_none", {{"a", Access::read}, {"b", Access::read}, {"out", Access::write}});
  return k;
}

const Kernel& loop_next() {
  static const Kernel k = cell_kernel<CellOp::loop_next>(
      "loop_next",
      {{"remaining", Access::read_write}, {"stop", Access::read}, {"going", Access::write}});
  return k;
}

const Kernel& cell_increment() {
  static const Kernel k = cell_kernel<CellOp::increment>(
      "cell_increment", {{"a", Access::read}, {"out", Access::write}});
  return k;
}

const Kernel& cell_mad() {
  static const Kernel k = cell_kernel<CellOp::mad>(
      "cell_mad",
      {{"a", Access::read}, {"b", Access::read}, {"c", Access::read}, {"out", Access::write}});
  return k;
}

const Kernel& first_true(int n) {
  constexpr int kMax = kMaxFirstTrue;
  if (n < 1 || n > kMax)
    throw InvalidArgument("kernels::first_true: n must be in [1, " + std::to_string(kMax) +
                          "], got " + std::to_string(n));
  static const std::vector<Kernel> kernels = [] {
    std::vector<Kernel> out;
    for (int count = 1; count <= kMax; ++count) {
      std::vector<ArrayParam> params;
      for (int c = 0; c < count; ++c) {
        std::string name = "c";
        name += std::to_string(c);  // (not "c" + ...: g++ 12 warns falsely on that form)
        params.push_back({name, Access::read});
      }
      params.push_back({"index", Access::write});
      out.push_back(cell_kernel<CellOp::first_true>("first_true", params));
    }
    return out;
  }();
  return kernels[static_cast<std::size_t>(n - 1)];
}

}  // namespace eagle::kernels
