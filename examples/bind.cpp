// Swap a graph's argument after the build, without recording or building again.
// Shows: Graph::bind, rebuild_count, a refused bind leaving the graph as it was.
// Pitfalls: the new array must match the old one (shape, dtype, device, contiguity) and must not
// share memory with another array of the graph; g() returns the graph's own arrays, which the
// next launch overwrites: copy what you keep.
#include <cstdio>
#include <vector>

#include "eagle/eagle.hpp"

using namespace eagle;

bool run(Device device) {
  Array x0 = Array::from(std::vector<float>{1, 2, 3}, {3}, device);
  Array y0 = Array::from(std::vector<float>{1, 2, 3}, {3}, device);
  Graph g = Graph::record([&](Recorder& r) {
    r.result(r.call(kernels::axpy(), {r.param("x", x0), r.param("y", y0), 10.0}));  // 10x + y
  });
  g.build(device);
  const bool first = g()[0].to_vector<float>() == std::vector<float>{11, 22, 33};

  // [readme:bind]
  Array x1 = Array::from(std::vector<float>{4, 5, 6}, {3}, device);
  g.bind("x", x1);  // patches every node holding x in place: kernel parameters, captured calls
  std::vector<float> y = g()[0].to_vector<float>();  // 10 * x1 + y0 = {41, 52, 63}
  try {
    g.bind("x", Array::empty({4}, DType::f32, device));  // another shape: refused
  } catch (const InvalidArgument& e) {
    std::printf("refused: %s\n", e.what());  // the graph is unchanged and still runs
  }
  // [/readme]
  const bool second = y == std::vector<float>{41, 52, 63};
  const bool third = g()[0].to_vector<float>() == std::vector<float>{41, 52, 63};
  std::printf("%s: rebuilds %d\n", device.str().c_str(), g.rebuild_count());
  return first && second && third && g.rebuild_count() == 0;
}

int main() {
  for (Device device : {Device::cpu(), Device::cuda(0)}) {
    if (device.is_cuda() && !cuda_available()) continue;
    if (!run(device)) {
      std::printf("bind: wrong result on %s\n", device.str().c_str());
      return 1;
    }
  }
  return 0;
}
