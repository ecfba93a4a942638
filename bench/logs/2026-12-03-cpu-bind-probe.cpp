#include <chrono>
#include <cstdio>
#include <vector>
#include "eagle/eagle.hpp"
using namespace eagle;
int main() {
  const Device dev = Device::cpu();
  std::vector<float> va(1024, 1.f), vb(1024, 2.f);
  Array xa = Array::from(va, {1024}, dev), xb = Array::from(vb, {1024}, dev);
  Graph g = Graph::record([&](Recorder& r) {
    const Value x = r.param("x", xa);
    std::vector<Value> outs;
    for (int i = 0; i < 100; ++i) outs.push_back(r.call(kernels::scale(), {x, 0.5 + i}));
    r.result(outs);
  });
  g.build(dev);
  for (int rep = 0; rep < 1; ++rep) {
    const int n = 2000;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) g.bind("x", (i & 1) ? xb : xa);
    double ns =
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    std::printf("bind per node (CPU executor): %.1f ns\n", ns / n / 100);
  }
}
