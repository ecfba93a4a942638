// A condition decided on the device at every launch: both arms are recorded, one runs.
// Shows: Recorder::if_ with an else arm over a one-cell u32 array, switched by bind.
// Pitfalls: a value made inside an arm is not readable after the if_ (the arm may not run):
// write the result into an array made before it (buffer=), as here.
#include <cstdint>
#include <cstdio>
#include <vector>

#include "eagle/eagle.hpp"

using namespace eagle;

bool run(Device device) {
  Array x0 = Array::from(std::vector<float>{1, 2, 3}, {3}, device);
  Array on = Array::from(std::vector<uint32_t>{1}, {1}, device);
  Array off = Array::from(std::vector<uint32_t>{0}, {1}, device);
  // [readme:if_else]
  Graph g = Graph::record([&](Recorder& r) {
    Value x = r.param("x", x0);
    Value out = r.empty({3}, DType::f32, "out");  // made before the if_: readable after it
    auto twice = [&] { r.call(kernels::scale(), {x, 2.0}, buffer(out)); };
    auto negate = [&] { r.call(kernels::scale(), {x, -1.0}, buffer(out)); };
    r.if_(r.param("flag", on), twice, negate);  // twice when the u32[1] cell != 0, else negate
    r.result(out);
  });
  g.build(device);  // on a GPU: one CUDA conditional node (IF/ELSE)
  std::vector<float> doubled = g()[0].to_vector<float>();
  g.bind("flag", off);  // the same graph now takes the else arm
  std::vector<float> negated = g()[0].to_vector<float>();
  // [/readme]
  return doubled == std::vector<float>{2, 4, 6} && negated == std::vector<float>{-1, -2, -3};
}

int main() {
  for (Device device : {Device::cpu(), Device::cuda(0)}) {
    if (device.is_cuda() && !cuda_available()) continue;
    if (!run(device)) {
      std::printf("if_else: wrong result on %s\n", device.str().c_str());
      return 1;
    }
  }
  return 0;
}
