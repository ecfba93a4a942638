// A kernel of your own in the typed form: one body for the CPU and the GPU, side by side.
// Shows: a typed definition (eagle/kernel/typed.hpp), typed_kernel<Def>(), an eager launch and a
// recorded call. CMake adds this file with eagle_kernel_sources(), which compiles it with nvcc
// in a CUDA build (the kernel then has a GPU side) and as plain C++ otherwise.
// Pitfalls: `params` names every parameter of the body, in order; a dtype the kernel does not
// list in `types` is declined with NotSupported naming what it serves.
#include <array>
#include <cstdio>
#include <vector>

#include "eagle/eagle.hpp"
#include "eagle/kernel/typed.hpp"

using namespace eagle;

// [readme:typed]
// out = a + t * (b - a), elementwise; any number of arrays and scalars, in the body's order.
struct Lerp {
  static constexpr const char* name = "lerp";
  static constexpr std::array<const char*, 4> params = {"a", "b", "out", "t"};
  using types = eagle::types<float, double>;  // the T the body is instantiated for
  template <class T>
  EAGLE_HD static void point(int64_t i, In<T> a, In<T> b, Out<T> out, double t) {
    out[i] = a[i] + T(t) * (b[i] - a[i]);
  }
};

const Kernel& lerp() {
  static const Kernel k = typed_kernel<Lerp>();  // out gets a's shape and the body's dtype
  return k;
}
// [/readme]

bool run(Device device) {
  Array a = Array::from(std::vector<double>{0, 10, 20}, {3}, device);
  Array b = Array::from(std::vector<double>{4, 14, 40}, {3}, device);
  // [readme:eager]
  Stream stream(device);
  ThreadTeam team;  // CPU work is split over it
  std::vector<Array> out = launch(lerp(), {a, b}, {0.25}, stream, team);  // outputs allocated
  launch_into(lerp(), {a, b}, {0.5}, {out[0]}, stream, team);             // into your arrays
  stream.synchronize();  // GPU launches are asynchronous
  // [/readme]
  const bool eager = out[0].to_vector<double>() == std::vector<double>{2, 12, 30};

  Graph g = Graph::record([&](Recorder& r) {
    r.result(r.call(lerp(), {r.param("a", a), r.param("b", b), 0.75}));
  });
  g.build(device);
  const bool graph = g()[0].to_vector<double>() == std::vector<double>{3, 13, 35};

  bool declined = false;  // i32 is not in `types`
  try {
    Array i = Array::from(std::vector<int32_t>{1, 2, 3}, {3}, device);
    launch(lerp(), {i, i}, {0.5}, stream, team);
  } catch (const NotSupported& e) {
    declined = true;
    std::printf("declined: %s\n", e.what());
  }
  return eager && graph && declined;
}

int main() {
  for (Device device : {Device::cpu(), Device::cuda(0)}) {
    if (device.is_cuda() && !cuda_available()) continue;
    if (!run(device)) {
      std::printf("typed_kernel: wrong result on %s\n", device.str().c_str());
      return 1;
    }
  }
  return 0;
}
