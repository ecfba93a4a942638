// The optimizer kernels' definitions and CPU implementations (eagle/kernel/optim.hpp).
#include <string>

#include "eagle/core/error.hpp"
#include "eagle/core/shape.hpp"
#include "eagle/kernel/optim.hpp"
#include "eagle/kernel/thread_team.hpp"
#include "kernel/adamw_impl.hpp"

namespace eagle::kernels {

namespace {

using detail::adamw_slot;

void step_count_cpu(const KernelArgs& a, const ThreadTeam&) {
  *static_cast<int64_t*>(a.arrays[0].data) += 1;
}

void adamw_cpu(const KernelArgs& a, const ThreadTeam& team) {
  const detail::AdamwStep s = detail::adamw_step(a);
  const int tensors = (a.num_arrays - 1) / 4;
  for (int j = 0; j < tensors; ++j) {
    float* p = static_cast<float*>(a.arrays[adamw_slot(j, detail::kAdamwParam)].data);
    const float* g = static_cast<const float*>(a.arrays[adamw_slot(j, detail::kAdamwGrad)].data);
    float* m = static_cast<float*>(a.arrays[adamw_slot(j, detail::kAdamwM)].data);
    float* v = static_cast<float*>(a.arrays[adamw_slot(j, detail::kAdamwV)].data);
    team.parallel_for(a.arrays[adamw_slot(j, 0)].numel, 1 << 14, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) detail::adamw_update(s, p[i], g[i], m[i], v[i]);
    });
  }
}

void check_count(const std::string& kernel, const ArrayMeta& count) {
  if (count.dtype != DType::i64 || checked_numel(count.shape, "kernel " + kernel) != 1)
    throw InvalidArgument("kernel " + kernel +
                          ": argument 'count' must be a one-cell i64 array, got " +
                          std::string(dtype_name(count.dtype)) + shape_str(count.shape));
}

Kernel make_adamw(int tensors) {
  KernelDef d;
  d.name = "adamw";
  d.arrays.push_back({"count", Access::read});
  for (int j = 0; j < tensors; ++j) {
    const std::string n = std::to_string(j);
    d.arrays.push_back({std::string("param") + n, Access::read_write});
    d.arrays.push_back({std::string("grad") + n, Access::read});
    d.arrays.push_back({std::string("m") + n, Access::read_write});
    d.arrays.push_back({std::string("v") + n, Access::read_write});
  }
  d.scalars = {{"lr"}, {"beta1"}, {"beta2"}, {"eps"}, {"weight_decay"}};
  // Every element reads the count cell: not per-sample (no in-place merging across calls).
  d.per_sample = false;
  d.reduces = false;
  d.no_gradient = true;  // an optimizer update is applied, not differentiated
  d.infer = [names = d.arrays](const std::vector<ArrayMeta>& in, const std::vector<ScalarArg>& s) {
    const std::string who = "kernel adamw";
    check_count("adamw", in[0]);
    const double lr = s[0].f, b1 = s[1].f, b2 = s[2].f, eps = s[3].f, wd = s[4].f;
    if (!(lr >= 0))
      throw InvalidArgument(who + ": scalar 'lr' must be >= 0, got " + std::to_string(lr));
    if (!(b1 >= 0 && b1 < 1))
      throw InvalidArgument(who + ": scalar 'beta1' must be in [0, 1), got " + std::to_string(b1));
    if (!(b2 >= 0 && b2 < 1))
      throw InvalidArgument(who + ": scalar 'beta2' must be in [0, 1), got " + std::to_string(b2));
    if (!(eps > 0))
      throw InvalidArgument(who + ": scalar 'eps' must be > 0, got " + std::to_string(eps));
    if (!(wd >= 0))
      throw InvalidArgument(who + ": scalar 'weight_decay' must be >= 0, got " +
                            std::to_string(wd));
    for (std::size_t i = 1; i < in.size(); ++i) {
      const ArrayMeta& param = in[1 + 4 * ((i - 1) / 4)];
      if (in[i].dtype != DType::f32)
        throw InvalidArgument(who + ": argument '" + names[i].name + "' must be f32, got " +
                              std::string(dtype_name(in[i].dtype)));
      if (in[i].shape != param.shape)
        throw InvalidArgument(who + ": argument '" + names[i].name + "' has shape " +
                              shape_str(in[i].shape) + " but its param has " +
                              shape_str(param.shape) + "; grad, m and v match their param");
    }
    return std::vector<ArrayMeta>{};
  };
  d.select = [tensors](const std::vector<DType>&) {
    KernelImpl impl;
    impl.cpu = &adamw_cpu;
    detail::attach_cuda_adamw(impl, tensors);
    return impl;
  };
  return Kernel(std::move(d));
}

}  // namespace

const Kernel& step_count() {
  static const Kernel k([] {
    KernelDef d;
    d.name = "step_count";
    d.arrays = {{"count", Access::read_write}};
    d.per_sample = true;
    d.no_gradient = true;
    d.infer = [](const std::vector<ArrayMeta>& in, const std::vector<ScalarArg>&) {
      check_count("step_count", in[0]);
      return std::vector<ArrayMeta>{};
    };
    d.select = [](const std::vector<DType>&) {
      KernelImpl impl;
      impl.cpu = &step_count_cpu;
      detail::attach_cuda_step_count(impl);
      return impl;
    };
    return d;
  }());
  return k;
}

const Kernel& adamw(int tensors) {
  if (tensors < 1 || tensors > kAdamwMaxTensors)
    throw InvalidArgument("kernels::adamw: tensors must be in [1, " +
                          std::to_string(kAdamwMaxTensors) + "], got " + std::to_string(tensors));
  static const std::vector<Kernel> kernels = [] {
    std::vector<Kernel> out;
    for (int n = 1; n <= kAdamwMaxTensors; ++n) out.push_back(make_adamw(n));
    return out;
  }();
  return kernels[static_cast<std::size_t>(tensors - 1)];
}

}  // namespace eagle::kernels
