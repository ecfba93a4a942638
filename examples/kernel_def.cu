// A kernel written with KernelDef: full control over parameters, shape rule and implementations.
// Shows: KernelDef (arrays with access, scalars, traits, infer, select), a CPU function over the
// thread team, a `__global__` function taking KernelArgsN<A, S> handed over with cuda_function.
// Pitfalls: the CUDA function's KernelArgsN<A, S> must match the definition (2 arrays, 2 scalars
// here: checked by Kernel::select); `infer` returns one ArrayMeta per write-only parameter.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "eagle/eagle.hpp"

#ifdef __CUDACC__
#include "eagle/kernel/cuda_function.hpp"
#endif

using namespace eagle;

// [readme:kernel_def]
// out = min(max(x, lo), hi) on f32.
void clamp_cpu(const KernelArgs& a, const ThreadTeam& team) {
  const float* x = static_cast<const float*>(a.arrays[0].data);
  float* out = static_cast<float*>(a.arrays[1].data);
  const float lo = static_cast<float>(a.scalars[0].f), hi = static_cast<float>(a.scalars[1].f);
  team.parallel_for(a.arrays[1].numel, 4096, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) out[i] = std::min(std::max(x[i], lo), hi);
  });
}

#ifdef __CUDACC__
__global__ void clamp_cuda(const eagle::KernelArgsN<2, 2> a) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= a.arrays[1].numel) return;
  const float x = static_cast<const float*>(a.arrays[0].data)[i];
  static_cast<float*>(a.arrays[1].data)[i] =
      fminf(fmaxf(x, static_cast<float>(a.scalars[0].f)), static_cast<float>(a.scalars[1].f));
}
CudaLaunchShape clamp_shape(const KernelArgs& a, const DeviceProperties&) {
  CudaLaunchShape s;
  s.block[0] = 256;
  s.grid[0] = static_cast<unsigned>(std::max<int64_t>(1, (a.arrays[1].numel + 255) / 256));
  return s;
}
#endif

const Kernel& clamp() {
  static const Kernel k([] {
    KernelDef d;
    d.name = "clamp";
    d.arrays = {{"x", Access::read}, {"out", Access::write}};
    d.scalars = {{"lo"}, {"hi"}};  // real scalars (ScalarKind::integer for int64_t ones)
    d.per_sample = true;           // out[i] depends on x[i] alone: may run in place
    d.infer = [](const std::vector<ArrayMeta>& in, const std::vector<ScalarArg>& s) {
      if (!(s[0].f <= s[1].f)) throw InvalidArgument("kernel clamp: needs lo <= hi");
      return std::vector<ArrayMeta>{in[0]};  // out: x's shape and dtype
    };
    d.select = [](const std::vector<DType>& dtypes) {
      if (dtypes[0] != DType::f32) throw NotSupported("kernel clamp: serves f32 only");
      KernelImpl impl;
      impl.cpu = &clamp_cpu;
#ifdef __CUDACC__
      impl.cuda_function = cuda_function(&clamp_cuda);
      impl.cuda_shape = &clamp_shape;
#endif
      return impl;
    };
    return d;
  }());
  return k;
}
// [/readme]

bool run(Device device) {
  Array x0 = Array::from(std::vector<float>{-3, 0.5f, 2, 9}, {4}, device);
  Graph g = Graph::record([&](Recorder& r) {
    Value x = r.param("x", x0);
    r.result(r.call(clamp(), {x, 0.0, 1.0}));
  });
  g.build(device);
  const bool clamped = g()[0].to_vector<float>() == std::vector<float>{0, 0.5f, 1, 1};
  bool refused = false;  // infer's check runs when the call is recorded
  try {
    Graph::record([&](Recorder& r) { r.call(clamp(), {r.param("x", x0), 1.0, 0.0}); });
  } catch (const InvalidArgument& e) {
    refused = true;
    std::printf("refused: %s\n", e.what());
  }
  return clamped && refused;
}

int main() {
  for (Device device : {Device::cpu(), Device::cuda(0)}) {
    if (device.is_cuda() && !cuda_available()) continue;
    if (!run(device)) {
      std::printf("kernel_def: wrong result on %s\n", device.str().c_str());
      return 1;
    }
  }
  return 0;
}
