// A fork: branches recorded one after the other that run concurrently, ordered only by waits.
// Shows: Recorder::parallel, Branch::wait.
// Pitfalls: two branches touching the same bytes, one of them writing, are refused at record
// time (a RecordError naming both nodes) unless one waits for the other.
#include <cstdio>
#include <vector>

#include "eagle/eagle.hpp"

using namespace eagle;

bool run(Device device) {
  Array x0 = Array::from(std::vector<float>{1, 2, 3, 4}, {4}, device);
  // [readme:fork]
  Graph g = Graph::record([&](Recorder& r) {
    Value x = r.param("x", x0);
    Value a = r.empty({4}, DType::f32, "a"), b = r.empty({4}, DType::f32, "b");
    Value c = r.empty({4}, DType::f32, "c");
    r.parallel({
        // branch 0: a = 2x
        [&](Branch&) {
          r.call(kernels::scale(), {x, 2.0}, buffer(a));
        },
        // branch 1
        [&](Branch& branch) {
          r.call(kernels::scale(), {x, 3.0}, buffer(b));  // b = 3x, concurrently with a
          branch.wait(a);                                 // one edge: after a is written
          r.call(kernels::add(), {a, b}, buffer(c));      // c = a + b
        },
    });
    r.result(c);  // after the join
  });
  // [/readme]
  g.build(device);
  return g()[0].to_vector<float>() == std::vector<float>{5, 10, 15, 20};
}

int main() {
  for (Device device : {Device::cpu(), Device::cuda(0)}) {
    if (device.is_cuda() && !cuda_available()) continue;
    if (!run(device)) {
      std::printf("fork_wait: wrong result on %s\n", device.str().c_str());
      return 1;
    }
  }
  return 0;
}
