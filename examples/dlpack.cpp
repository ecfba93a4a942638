// Exchanging arrays with other frameworks through DLPack, without copies; read-only arrays.
// Shows: to_dlpack, from_dlpack (the deleter runs when the last view dies), view_dlpack, an
// imported array as a graph argument, Array::as_read_only refused as an output.
// Pitfalls: the consumer of an exported tensor calls its deleter exactly once; view_dlpack does
// not own anything, so the memory must outlive the view.
#include <cstdio>
#include <vector>

#include "eagle/eagle.hpp"

using namespace eagle;

bool run(Device device) {
  Array x = Array::from(std::vector<float>{1, 2, 3, 4}, {2, 2}, device);
  // [readme:dlpack]
  DLManagedTensorVersioned* t = to_dlpack(x);  // shares x's memory and keeps it alive
  Array imported = from_dlpack(t);             // takes ownership: runs t's deleter when done
  Array view = view_dlpack(t->dl_tensor);      // a non-owning view: owns and deletes nothing
  Graph g = Graph::record([&](Recorder& r) {
    r.result(r.call(kernels::scale(), {r.param("x", imported), 3.0}));
  });
  g.build(device);
  std::vector<float> tripled = g()[0].to_vector<float>();  // {3, 6, 9, 12}
  DLManagedTensorVersioned* out = to_dlpack(g()[0]);       // hand a result to another framework
  out->deleter(out);                                       // ... which calls the deleter once
  // [/readme]
  const bool shared = imported.data() == x.data() && view.data() == x.data();

  // [readme:read_only]
  Array frozen = Array::empty({2, 2}, DType::f32, device).as_read_only();  // eagle never writes it
  Stream stream(device);
  bool refused = false;
  try {
    launch_into(kernels::scale(), {x}, {2.0}, {frozen}, stream, ThreadTeam::serial());
  } catch (const InvalidArgument& e) {
    refused = true;  // "... is written but the array is read-only"
    std::printf("refused: %s\n", e.what());
  }
  // [/readme]
  return shared && refused && tripled == std::vector<float>{3, 6, 9, 12};
}

int main() {
  for (Device device : {Device::cpu(), Device::cuda(0)}) {
    if (device.is_cuda() && !cuda_available()) continue;
    if (!run(device)) {
      std::printf("dlpack: wrong result on %s\n", device.str().c_str());
      return 1;
    }
  }
  return 0;
}
