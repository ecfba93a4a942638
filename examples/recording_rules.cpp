// What recording checks: dependencies from views, races refused, and every refusal leaving the
// recording exactly as it was (each Recorder call is a transaction).
// Shows: Value::slice views written independently, a RecordError for an overlapping write,
// recording going on after a refused call, Recorder::assign.
// Pitfalls: a refused call's outputs are dead values (using one throws); a kernel may write a
// view that overlaps its input only when it is the very same view and the kernel is per-sample.
#include <cstdio>
#include <vector>

#include "eagle/eagle.hpp"

using namespace eagle;

bool run(Device device) {
  Array x0 = Array::from(std::vector<float>{1, 2, 3, 4}, {4}, device);
  bool refused = false;
  // [readme:rules]
  Graph g = Graph::record([&](Recorder& r) {
    Value x = r.empty({4}, DType::f32, "x");
    r.call(kernels::copy(), {r.param("x0", x0)}, buffer(x));
    Value head = x.slice(0, 2), tail = x.slice(2, 4);      // views: [0, 2) and [2, 4) of x
    r.call(kernels::scale(), {head, 10.0}, buffer(head));  // in place: the same view, per-sample
    r.call(kernels::scale(), {tail, -1.0}, buffer(tail));  // independent of the head: no edge
    try {
      r.call(kernels::add(), {head, x.slice(1, 3)}, buffer(head));  // writes what it reads
    } catch (const RecordError& e) {
      refused = true;  // names the node, the array and both parameters
      std::printf("refused: %s\n", e.what());
    }
    Value y = r.call(kernels::scale(), {x, 0.5});
    r.assign(x, y);  // x = y: outside a device construct, a plain rebinding of the name
    r.result(x);
  });
  // [/readme]
  g.build(device);
  // copy, two scales of the views, the last scale: the refused add left nothing behind
  return refused && g.nodes().size() == 4 &&
         g()[0].to_vector<float>() == std::vector<float>{5, 10, -1.5f, -2};
}

int main() {
  for (Device device : {Device::cpu(), Device::cuda(0)}) {
    if (device.is_cuda() && !cuda_available()) continue;
    if (!run(device)) {
      std::printf("recording_rules: wrong result on %s\n", device.str().c_str());
      return 1;
    }
  }
  return 0;
}
