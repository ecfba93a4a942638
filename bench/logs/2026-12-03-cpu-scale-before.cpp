// The same three shapes as eagle_bench section 9, against the code before this session (1069e0a).
#include <chrono>
#include <cstdio>
#include "eagle/eagle.hpp"
using namespace eagle;
using Clock = std::chrono::steady_clock;
static double ms(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}
template <class B>
void run(const char* name, int n, const B& body) {
  auto t0 = Clock::now();
  Graph g = Graph::record(body);
  double r = ms(t0);
  t0 = Clock::now();
  g.build(Device::cpu(), BuildOptions{1});
  std::printf("%-8s %6dk nodes: record %8.1f ms, build %8.1f ms\n", name, n / 1000, r, ms(t0));
  std::fflush(stdout);
}
int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 200000;
  Array x0 = Array::from(std::vector<float>(16, 0.5f), {16}, Device::cpu());
  run("chain", n, [&](Recorder& r) {
    Value x = r.param("x", x0);
    Value v = x;
    for (int k = 0; k < n; ++k) v = r.call(kernels::axpy(), {v, x, 0.5});
    r.result(v);
  });
  run("fan-out", n, [&](Recorder& r) {
    Value x = r.param("x", x0);
    Value last;
    for (int k = 0; k < n; ++k) last = r.call(kernels::scale(), {x, 1.0 + k});
    r.result(last);
  });
  run("slices", n, [&](Recorder& r) {
    Value m = r.empty({n, 4}, DType::f32, "m");
    for (int k = 0; k < n; ++k) r.call(kernels::fill(), {double(k)}, buffer(m.slice(k, k + 1)));
    r.result(r.call(kernels::sum(), {m}));
  });
}
