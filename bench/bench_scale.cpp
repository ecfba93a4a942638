// Section 9: recording and building at scale, on the CPU. Three shapes of graph, each at 25k,
// 50k, 100k and 200k nodes: a chain (each node reads the one before), a fan-out (every node reads
// one param) and disjoint slices (every node writes its own rows of one array, then one reader
// reads them all). Recording and building should grow linearly: the goal is under 2 s for each at
// 200k nodes (on the 2-core development machine; measured wherever the bench runs).
#include <cstdio>
#include <string>

#include "bench_common.hpp"

namespace eagle::bench {

namespace {

struct Timing {
  double record_ms = 0;
  double build_ms = 0;
};

double ms_since(Clock::time_point t0) {
  return ns_since(t0) * 1e-6;
}

template <class Body>
Timing time_graph(const Body& body) {
  Clock::time_point t0 = Clock::now();
  Graph g = Graph::record(body);
  Timing t;
  t.record_ms = ms_since(t0);
  t0 = Clock::now();
  g.build(Device::cpu(), BuildOptions{1});
  t.build_ms = ms_since(t0);
  return t;
}

Timing chain(int n, const Array& x0) {
  return time_graph([&](Recorder& r) {
    const Value x = r.param("x", x0);
    Value v = x;
    for (int k = 0; k < n; ++k) v = r.call(kernels::axpy(), {v, x, kAlpha});
    r.result(v);
  });
}

Timing fan_out(int n, const Array& x0) {
  return time_graph([&](Recorder& r) {
    const Value x = r.param("x", x0);
    Value last;
    for (int k = 0; k < n; ++k) last = r.call(kernels::scale(), {x, 1.0 + k});
    r.result(last);
  });
}

Timing slices(int n) {
  return time_graph([&](Recorder& r) {
    const Value m = r.empty({n, 4}, DType::f32, "m");
    for (int k = 0; k < n; ++k) r.call(kernels::fill(), {double(k)}, buffer(m.slice(k, k + 1)));
    r.result(r.call(kernels::sum(), {m}));
  });
}

}  // namespace

void run_scale_sections(const Options& o, Report& report) {
  report.section(
      "9. CPU: recording and building at scale (chain, fan-out of one param, disjoint slices "
      "of one array); goal: each under 2 s at 200k nodes, growing linearly");
  const Array x0 = Array::from(random_floats(16, 9), {16}, Device::cpu());
  const int sizes[] = {25000, 50000, 100000, 200000};
  const int count = o.quick ? 2 : 4;
  struct Shape_ {
    const char* name;
    Timing t[4];
  } shapes[3] = {{"chain", {}}, {"fan-out", {}}, {"slices", {}}};
  for (int i = 0; i < count; ++i) {
    const int n = sizes[i];
    shapes[0].t[i] = chain(n, x0);
    shapes[1].t[i] = fan_out(n, x0);
    shapes[2].t[i] = slices(n);
    for (const Shape_& s : shapes) {
      char line[160];
      std::snprintf(line, sizeof(line), "%-8s %6dk nodes: record %8.1f ms, build %8.1f ms", s.name,
                    n / 1000, s.t[i].record_ms, s.t[i].build_ms);
      report.note(line);
    }
  }
  if (o.quick) return;
  for (const Shape_& s : shapes) {
    char detail[160];
    std::snprintf(detail, sizeof(detail),
                  "record %.0f ms, build %.0f ms at 200k; 200k/25k = %.1fx and %.1fx (linear: 8x)",
                  s.t[3].record_ms, s.t[3].build_ms, s.t[3].record_ms / s.t[0].record_ms,
                  s.t[3].build_ms / s.t[0].build_ms);
    report.check(std::string(s.name) + ": record and build of 200k nodes under 2 s each",
                 s.t[3].record_ms < 2000 && s.t[3].build_ms < 2000, detail);
  }
}

}  // namespace eagle::bench
