// Record a graph once, build it for a device, replay it many times.
// Shows: Graph::record, Recorder::param / call / result, build, g() and g(n).
// Pitfalls: the recording function runs once, when the graph is recorded; an ordinary C++ `if`
// in it decides then, not at every launch (see if_else.cpp for a condition decided per launch).
#include <cstdio>
#include <vector>

#include "eagle/eagle.hpp"

using namespace eagle;

bool run(Device device) {
  // [readme:record]
  Array x0 = Array::from(std::vector<float>{1, 2, 3, 4}, {4}, device);
  Graph g = Graph::record([&](Recorder& r) {
    Value x = r.param("x", x0);                    // a named argument: bind("x", ...) swaps it
    Value y = r.call(kernels::scale(), {x, 2.0});  // a node; nothing runs and nothing is allocated
    Value z = r.call(kernels::add(), {y, x});      // ordered after scale: it reads y
    r.result({z, r.call(kernels::sum(), {z})});    // what g() returns
  });
  g.build(device);                      // one CUDA graph on a GPU, a host schedule on the CPU
  const std::vector<Array>& out = g();  // one launch and a wait
  g(100);                               // 100 launches and one wait
  // [/readme]
  std::printf("%s: %zu nodes, backend %s\n", device.str().c_str(), g.nodes().size(),
              g.backend().c_str());
  return out[0].to_vector<float>() == std::vector<float>{3, 6, 9, 12} &&
         out[1].to_vector<float>() == std::vector<float>{30};
}

int main() {
  for (Device device : {Device::cpu(), Device::cuda(0)}) {
    if (device.is_cuda() && !cuda_available()) continue;
    if (!run(device)) {
      std::printf("record_replay: wrong result on %s\n", device.str().c_str());
      return 1;
    }
  }
  return 0;
}
