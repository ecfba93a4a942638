#include "testing_kernels.hpp"

#include "eagle/core/error.hpp"
#include "eagle/kernel/thread_team.hpp"

namespace eagle::test {

namespace {

void count_cpu(const KernelArgs& a, const ThreadTeam&) {
  ++*static_cast<uint32_t*>(a.arrays[0].data);
}

CudaLaunchShape one_thread(const KernelArgs&, const DeviceProperties&) {
  return {};
}

void square_cpu(const KernelArgs& a, const ThreadTeam& team) {
  const float* x = static_cast<const float*>(a.arrays[0].data);
  float* out = static_cast<float*>(a.arrays[1].data);
  team.parallel_for(a.arrays[1].numel, 4096, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) out[i] = x[i] * x[i];
  });
}

void greater_cpu(const KernelArgs& a, const ThreadTeam&) {
  *static_cast<uint32_t*>(a.arrays[1].data) =
      *static_cast<const double*>(a.arrays[0].data) > a.scalars[0].f ? 1u : 0u;
}

void countdown_cpu(const KernelArgs& a, const ThreadTeam&) {
  uint32_t* remaining = static_cast<uint32_t*>(a.arrays[0].data);
  *remaining -= 1;
  *static_cast<uint32_t*>(a.arrays[1].data) = *remaining > 0 ? 1u : 0u;
}

void reverse_cpu(const KernelArgs& a, const ThreadTeam&) {
  const float* x = static_cast<const float*>(a.arrays[0].data);
  float* out = static_cast<float*>(a.arrays[1].data);
  const int64_t n = a.arrays[0].numel;
  for (int64_t i = 0; i < n; ++i) out[i] = x[n - 1 - i];
}

}  // namespace

const Kernel& reverse_kernel() {
  static const Kernel k([] {
    KernelDef d;
    d.name = "reverse";
    d.arrays = {{"x", Access::read}, {"out", Access::write}};
    d.per_sample = false;
    d.infer = [](const std::vector<ArrayMeta>& in, const std::vector<ScalarArg>&) {
      return std::vector<ArrayMeta>{in[0]};
    };
    d.select = [](const std::vector<DType>&) {
      KernelImpl impl;
      impl.cpu = &reverse_cpu;
      return impl;
    };
    return d;
  }());
  return k;
}

const Kernel& greater_kernel() {
  static const Kernel k([] {
    KernelDef d;
    d.name = "greater";
    d.arrays = {{"x", Access::read}, {"cell", Access::write}};
    d.scalars = {{"threshold"}};
    d.per_sample = false;
    d.infer = [](const std::vector<ArrayMeta>& in, const std::vector<ScalarArg>&) {
      if (in[0].dtype != DType::f64 || in[0].shape != Shape{1})
        throw InvalidArgument("kernel greater: argument 'x' must be f64[1]");
      return std::vector<ArrayMeta>{{{1}, DType::u32}};
    };
    d.select = [](const std::vector<DType>&) {
      KernelImpl impl;
      impl.cpu = &greater_cpu;
      impl.cuda_function = greater_cuda_function();
      impl.cuda_shape = &one_thread;
      return impl;
    };
    return d;
  }());
  return k;
}

const Kernel& countdown_kernel() {
  static const Kernel k([] {
    KernelDef d;
    d.name = "countdown";
    d.arrays = {{"remaining", Access::read_write}, {"cell", Access::write}};
    d.per_sample = false;
    d.infer = [](const std::vector<ArrayMeta>&, const std::vector<ScalarArg>&) {
      return std::vector<ArrayMeta>{{{1}, DType::u32}};
    };
    d.select = [](const std::vector<DType>&) {
      KernelImpl impl;
      impl.cpu = &countdown_cpu;
      impl.cuda_function = countdown_cuda_function();
      impl.cuda_shape = &one_thread;
      return impl;
    };
    return d;
  }());
  return k;
}

const Kernel& count_kernel() {
  static const Kernel k([] {
    KernelDef d;
    d.name = "count";
    d.arrays = {{"counter", Access::read_write}};
    d.per_sample = true;
    d.infer = [](const std::vector<ArrayMeta>&, const std::vector<ScalarArg>&) {
      return std::vector<ArrayMeta>{};
    };
    d.select = [](const std::vector<DType>&) {
      KernelImpl impl;
      impl.cpu = &count_cpu;
      impl.cuda_function = count_cuda_function();
      impl.cuda_shape = &one_thread;
      return impl;
    };
    return d;
  }());
  return k;
}

const Kernel& cpu_only_square() {
  static const Kernel k([] {
    KernelDef d;
    d.name = "square";
    d.arrays = {{"x", Access::read}, {"out", Access::write}};
    d.infer = [](const std::vector<ArrayMeta>& in, const std::vector<ScalarArg>&) {
      return std::vector<ArrayMeta>{in[0]};
    };
    d.select = [](const std::vector<DType>& dtypes) {
      if (dtypes[0] != DType::f32) throw NotSupported("square: only f32");
      KernelImpl impl;
      impl.cpu = &square_cpu;
      return impl;
    };
    return d;
  }());
  return k;
}

}  // namespace eagle::test
