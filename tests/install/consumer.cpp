// Records, builds and runs a graph through the installed package, with a standard kernel and a
// typed kernel of its own; exits 0 only on the right values.
#include <cstdio>

#include "eagle/eagle.hpp"

const eagle::Kernel& add_one();  // consumer_kernels.cu

int main() {
  using namespace eagle;
  Array x0 = Array::from(std::vector<float>{1, 2, 3, 4}, {4}, Device::cpu());
  Graph g = Graph::record([&](Recorder& r) {
    Value x = r.param("x", x0);
    r.result(r.call(kernels::sum(), {r.call(add_one(), {r.call(kernels::scale(), {x, 2.0})})}));
  });
  g.build(Device::cpu());
  const float total = g()[0].to_vector<float>()[0];
  std::printf("consumer: sum(2x + 1) = %g (%s)\n", total, g.backend().c_str());
  return total == 24.0f ? 0 : 1;
}
