// A planned operation inside a recorded graph: the planner picks the engine when the graph is
// built, and the plan's launches become nodes of the graph.
// Shows: engines::planned_kernel, recording it with ordinary kernels, bind patching it in place.
// Pitfalls: the kernel's parameters are the op graph's operands in ascending uid order (inputs
// read, outputs written); a graph no engine serves on the device is declined at build with
// NotSupported listing each engine's reason.
#include <cstdio>
#include <vector>

#include "eagle/eagle.hpp"

using namespace eagle;

bool run(Device device) {
  Array a0 = Array::from(std::vector<float>{1, 2, 3}, {3}, device);
  Array b0 = Array::from(std::vector<float>{4, 5, 6}, {3}, device);
  // [readme:planned]
  op::Graph og("add");
  op::Tensor a = og.tensor({"a", {3}, DType::f32}), b = og.tensor({"b", {3}, DType::f32});
  og.pointwise("add", a, b).set_output(true).set_name("sum");
  const Kernel add_op = engines::planned_kernel(og);  // parameters a, b (read), sum (written)

  Graph g = Graph::record([&](Recorder& r) {
    Value s = r.call(add_op, {r.param("a", a0), r.param("b", b0)});
    r.result(r.call(kernels::scale(), {s, 10.0}));  // an ordinary kernel reads the op's output
  });
  g.build(device);  // plans a copy of og for this device, once
  // [/readme]
  const bool first = g()[0].to_vector<float>() == std::vector<float>{50, 70, 90};
  g.bind("a", Array::from(std::vector<float>{0, 0, 1}, {3}, device));
  const bool second = g()[0].to_vector<float>() == std::vector<float>{40, 50, 70};
  std::printf("%s: %d native nodes, rebuilds %d\n", device.str().c_str(), g.native_node_count(),
              g.rebuild_count());
  return first && second;
}

int main() {
  for (Device device : {Device::cpu(), Device::cuda(0)}) {
    if (device.is_cuda() && !cuda_available()) continue;
    if (!run(device)) {
      std::printf("planned_in_graph: wrong result on %s\n", device.str().c_str());
      return 1;
    }
  }
  return 0;
}
