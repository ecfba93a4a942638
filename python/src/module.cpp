// eagle._eagle: the extension the eagle Python package is built on. Everything here is the C++
// library's own behaviour; python/eagle/ adds only Pythonic spellings and the builder decorator.
#include "bindings.hpp"

NB_MODULE(_eagle, m) {
  using namespace eagle::python;
  // eagle.kernels keeps Kernel objects in module globals and Kernel.__call__ is a Python
  // function: cycles the interpreter does not collect at exit, which nanobind would report as
  // leaks on every run. Reference counting itself is checked by the tests.
  nb::set_leak_warnings(false);
  m.doc() = "eagle's C++ core: arrays, kernels, recorded graphs, planning, reverse mode.";
  bind_errors(m);
  bind_core(m);
  bind_array(m);
  bind_kernels(m);
  bind_recording(m);
  bind_graph(m);
  bind_diff(m);
  bind_op(m);
  bind_ragged(m);
  bind_comm(m);
  bind_data(m);
  bind_bench(m);
}
