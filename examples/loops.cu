// Loops decided on the device at every launch: a while_ loop and a capped for_ loop that breaks.
// Shows: Recorder::while_, Recorder::for_ with break_if, a typed kernel writing a condition
// cell, a name rebound in a loop body (x = ...), which carries its array from turn to turn.
// Pitfalls: a while_ body must write its cell (one that never does is refused: it could not
// stop); break_if and continue_if go directly in the for_ body and guard what follows them.
#include <array>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "eagle/eagle.hpp"
#include "eagle/kernel/typed.hpp"

using namespace eagle;

// cell = x > limit, for a one-element x (the max of an array): a condition cell.
struct Above {
  static constexpr const char* name = "above";
  static constexpr std::array<const char*, 3> params = {"x", "cell", "limit"};
  using types = eagle::types<float>;
  template <class T>
  EAGLE_HD static void point(int64_t i, In<T> x, Out<uint32_t> cell, double limit) {
    cell[i] = x[i] > T(limit) ? 1u : 0u;
  }
};

const Kernel& above() {
  static const Kernel k = typed_kernel<Above>();
  return k;
}

bool run(Device device) {
  Array x0 = Array::from(std::vector<float>{8, 3, -2, 5}, {4}, device);
  // [readme:while]
  Graph halve = Graph::record([&](Recorder& r) {
    Value x = r.param("x", x0);  // written below: the graph writes a private copy of it
    Value going = r.call(above(), {r.call(kernels::max(), {x}), 1.0});
    r.while_(going, [&] {                      // while max(x) > 1
      x = r.call(kernels::scale(), {x, 0.5});  // rebound: merged in place into x's array
      r.call(above(), {r.call(kernels::max(), {x}), 1.0}, buffer(going));  // writes its cell
    });
    r.result(x);
  });
  // [/readme]
  halve.build(device);
  const bool halved =
      halve()[0].to_vector<float>() == std::vector<float>{1, 0.375f, -0.25f, 0.625f};

  Array y0 = Array::from(std::vector<float>{1, 2, 3, 4}, {4}, device);
  // [readme:for]
  Graph grow = Graph::record([&](Recorder& r) {
    Value y = r.param("y", y0);
    r.for_(10, [&] {  // at most 10 turns
      y = r.call(kernels::scale(), {y, 2.0});
      r.break_if(r.call(above(), {r.call(kernels::max(), {y}), 100.0}));  // ends the loop
    });
    r.result(y);
  });
  // [/readme]
  grow.build(device);
  const bool broke = grow()[0].to_vector<float>() == std::vector<float>{32, 64, 96, 128};
  grow.bind("y", Array::from(std::vector<float>{0.0625f, 0.03125f, 0, -1}, {4}, device));
  const bool capped = grow()[0].to_vector<float>() == std::vector<float>{64, 32, 0, -1024};
  return halved && broke && capped;
}

int main() {
  for (Device device : {Device::cpu(), Device::cuda(0)}) {
    if (device.is_cuda() && !cuda_available()) continue;
    if (!run(device)) {
      std::printf("loops: wrong result on %s\n", device.str().c_str());
      return 1;
    }
  }
  return 0;
}
