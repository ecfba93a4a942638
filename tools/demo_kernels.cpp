#include "demo_kernels.hpp"

#include "demo_kernels_common.hpp"
#include "eagle/core/error.hpp"
#include "eagle/kernel/thread_team.hpp"

namespace eagle::demo {

namespace {

template <class T>
void heat_cpu(const KernelArgs& a, const ThreadTeam& team) {
  const T* u = static_cast<const T*>(a.arrays[0].data);
  T* out = static_cast<T*>(a.arrays[1].data);
  const int64_t rows = a.arrays[0].dims[0], cols = a.arrays[0].dims[1];
  const T alpha = static_cast<T>(a.scalars[0].f);
  team.parallel_for(rows, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = heat_point(u, rows, cols, r, c, alpha);
  });
}

CudaLaunchShape heat_shape(const KernelArgs& a, const DeviceProperties&) {
  CudaLaunchShape s;
  s.block[0] = 32;
  s.block[1] = 8;
  s.grid[0] = static_cast<unsigned>((a.arrays[0].dims[1] + 31) / 32);
  s.grid[1] = static_cast<unsigned>((a.arrays[0].dims[0] + 7) / 8);
  return s;
}

}  // namespace

const Kernel& heat_step() {
  static const Kernel k([] {
    KernelDef d;
    d.name = "heat_step";
    d.arrays = {{"u", Access::read}, {"out", Access::write}};
    d.scalars = {{"alpha"}};
    d.per_sample = false;  // reads its neighbours
    d.infer = [](const std::vector<ArrayMeta>& in, const std::vector<ScalarArg>& s) {
      if (in[0].shape.size() != 2)
        throw InvalidArgument("kernel heat_step: argument 'u' must be 2-D, got " +
                              shape_str(in[0].shape));
      if (!(s[0].f > 0 && s[0].f <= 0.25))
        throw InvalidArgument(
            "kernel heat_step: scalar 'alpha' must be in (0, 0.25] for stability");
      return std::vector<ArrayMeta>{in[0]};
    };
    d.select = [](const std::vector<DType>& dtypes) {
      KernelImpl impl;
      if (dtypes[0] == DType::f32) {
        impl.cpu = &heat_cpu<float>;
      } else if (dtypes[0] == DType::f64) {
        impl.cpu = &heat_cpu<double>;
      } else {
        throw NotSupported("kernel heat_step: dtype " + std::string(dtype_name(dtypes[0])) +
                           " is not served (serves f32, f64)");
      }
      impl.cuda_function = heat_step_cuda(dtypes[0]);
      impl.cuda_shape = impl.cuda_function ? &heat_shape : nullptr;
      return impl;
    };
    return d;
  }());
  return k;
}

}  // namespace eagle::demo
