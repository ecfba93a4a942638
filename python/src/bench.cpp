// Timing hooks for bench/python/host_cost.py: the same work looped in C++, so the benchmark can
// put the Python call's host cost beside the C++ call's in one run.
#include <nanobind/stl/vector.h>

#include <chrono>

#include "bindings.hpp"
#include "eagle/exec/graph.hpp"

namespace eagle::python {

void bind_bench(nb::module_& m) {
  m.def(
      "_bench_graph_calls",
      [](Graph& g, int64_t calls) {
        nb::gil_scoped_release release;
        const auto start = std::chrono::steady_clock::now();
        for (int64_t i = 0; i < calls; ++i) g();
        const auto stop = std::chrono::steady_clock::now();
        return std::chrono::duration<double, std::nano>(stop - start).count() /
               static_cast<double>(calls);
      },
      nb::arg("graph"), nb::arg("calls"),
      "Nanoseconds per g() (launch, wait, checks) looped in C++ (for the host-cost benchmark).");
}

}  // namespace eagle::python
