// Kernels: the standard and cell kernels, user kernels loaded from a shared library, and eager
// launches (outside a recording a kernel call runs at once and returns its outputs).
#include <dlfcn.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <map>

#include "bindings.hpp"
#include "eagle/core/error.hpp"
#include "eagle/kernel/cells.hpp"
#include "eagle/kernel/export.hpp"
#include "eagle/kernel/kernel.hpp"
#include "eagle/kernel/optim.hpp"
#include "eagle/kernel/standard.hpp"
#include "eagle/kernel/thread_team.hpp"
#include "eagle/kernel/views.hpp"
#include "eagle/ragged/kernels.hpp"

namespace eagle::python {

std::optional<Scalar> to_scalar(nb::handle obj) {
  if (nb::isinstance<nb::bool_>(obj) || nb::isinstance<nb::int_>(obj))
    return Scalar(nb::cast<int64_t>(obj));
  if (nb::isinstance<nb::float_>(obj)) return Scalar(nb::cast<double>(obj));
  return std::nullopt;
}

namespace {

const ThreadTeam& eager_team() {
  static const ThreadTeam team;
  return team;
}

nb::list describe_params(const Kernel& k) {
  nb::list out;
  for (const ArrayParam& p : k.def().arrays)
    out.append(nb::make_tuple(p.name, std::string(access_name(p.access)), p.strided));
  return out;
}

// Splits a call's positional arguments: arrays (in order) and scalars (in order).
void split_eager_args(const nb::sequence& args, std::vector<Array>& arrays,
                      std::vector<Scalar>& scalars) {
  int position = 0;
  for (nb::handle a : args) {
    if (std::optional<Scalar> number = to_scalar(a))
      scalars.push_back(*number);
    else if (is_array_like(a))
      arrays.push_back(to_array(a));
    else
      throw InvalidArgument("kernel call: argument " + std::to_string(position) +
                            " is neither an array nor a number (" +
                            nb::cast<std::string>(nb::str(a.type())) + ")");
    ++position;
  }
}

std::map<std::string, Kernel> standard_kernels() {
  std::map<std::string, Kernel> k{
      {"fill", kernels::fill()},
      {"copy", kernels::copy()},
      {"scale", kernels::scale()},
      {"axpy", kernels::axpy()},
      {"add", kernels::add()},
      {"mul", kernels::mul()},
      {"where", kernels::where()},
      {"sum", kernels::sum()},
      {"max", kernels::max()},
      {"broadcast", kernels::broadcast()},
      {"equal_mask", kernels::equal_mask()},
      {"mul_div", kernels::mul_div()},
      {"cell_or", kernels::cell_or()},
      {"cell_none", kernels::cell_none()},
      {"loop_next", kernels::loop_next()},
      {"cell_increment", kernels::cell_increment()},
      {"cell_mad", kernels::cell_mad()},
      {"step_count", kernels::step_count()},
      {"gather_view", kernels::gather_view()},
      {"add_to_view", kernels::add_to_view()},
      {"scatter_view", kernels::scatter_view()},
      {"zero_view", kernels::zero_view()},
      {"validate_cu_seqlens", ragged::validate_cu_seqlens()},
      {"chunk_offsets", ragged::chunk_offsets()},
      {"chunk_tasks", ragged::chunk_tasks()},
      {"seqlen_bucket", ragged::seqlen_bucket()},
      {"active_rows", ragged::active_rows()},
      {"mask_rows", ragged::mask_rows()},
      {"gradient_barrier", ragged::gradient_barrier()},
  };
  return k;
}

}  // namespace

void bind_kernels(nb::module_& m) {
  nb::class_<Kernel>(m, "Kernel",
                     "A kernel: its name, array parameters with their access, scalar parameters "
                     "and implementations. Call it inside a recording to record a node, outside "
                     "one to run it at once.")
      .def_prop_ro("name", &Kernel::name)
      .def_prop_ro("num_inputs", &Kernel::num_inputs,
                   "Read and read-write arrays the caller passes.")
      .def_prop_ro("num_outputs", &Kernel::num_outputs, "Write-only arrays the call makes.")
      .def_prop_ro("params", &describe_params, "(name, access, strided) per array parameter.")
      .def_prop_ro("scalars",
                   [](const Kernel& k) {
                     std::vector<std::string> names;
                     for (const auto& s : k.def().scalars) names.push_back(s.name);
                     return names;
                   })
      .def("__eq__", [](const Kernel& a, const Kernel& b) { return a == b; })
      .def("__repr__", [](const Kernel& k) { return "eagle.Kernel('" + k.name() + "')"; })
      // Recording or running is decided in Python (eagle/kernels.py: the current recorder).
      .def(
          "__call__",
          [](nb::handle self, nb::args args, nb::kwargs kwargs) {
            return nb::module_::import_("eagle.kernels").attr("_call")(self, *args, **kwargs);
          },
          "kernel(*arrays_and_numbers, buffer=None, label=''): inside a recording records a "
          "node and returns its Value(s); outside one runs now and returns the outputs.");

  m.def("_standard_kernels", &standard_kernels, "eagle's own kernels by name.");
  m.def("_first_true", &kernels::first_true, nb::arg("n"),
        "The kernel deciding an elif chain of n conditions.");
  m.def("_adamw", &kernels::adamw, nb::arg("tensors"),
        "The fused AdamW kernel over `tensors` parameter tensors (eagle/kernel/optim.hpp).");
  m.def(
      "_launch",
      [](const Kernel& k, const nb::sequence& args, const nb::object& buffers) {
        std::vector<Array> inputs;
        std::vector<Scalar> scalars;
        split_eager_args(args, inputs, scalars);
        std::vector<Array> outputs;
        if (!buffers.is_none())
          for (nb::handle b : buffers) outputs.push_back(to_array(b));
        const Device device = !inputs.empty()    ? inputs[0].device()
                              : !outputs.empty() ? outputs[0].device()
                                                 : Device::cpu();
        const Stream& stream = eager_stream(device);
        nb::gil_scoped_release release;
        if (outputs.empty() && k.num_outputs() > 0) {
          outputs = launch(k, inputs, scalars, stream, eager_team());
        } else {
          launch_into(k, inputs, scalars, outputs, stream, eager_team());
        }
        stream.synchronize();
        return outputs;
      },
      nb::arg("kernel"), nb::arg("args"), nb::arg("buffers") = nb::none(),
      "Runs a kernel now: arrays and numbers in order; returns the outputs (complete).");
  m.def(
      "_load_kernels",
      [](const std::string& path) {
        // Kept open for the life of the process: its kernels' code lives there.
        void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (lib == nullptr)
          throw InvalidArgument("load_kernels: cannot open '" + path + "': " + dlerror());
        auto* fn = reinterpret_cast<ExportKernelsFn>(dlsym(lib, kExportKernelsSymbol));
        if (fn == nullptr)
          throw InvalidArgument("load_kernels: '" + path + "' exports no " +
                                std::string(kExportKernelsSymbol) +
                                " (define its kernels with EAGLE_EXPORT_KERNELS, "
                                "eagle/kernel/export.hpp)");
        std::vector<Kernel> kernels;
        fn(&kernels);
        std::map<std::string, Kernel> by_name;
        for (const Kernel& k : kernels) {
          if (!by_name.emplace(k.name(), k).second)
            throw InvalidArgument("load_kernels: '" + path + "' exports two kernels named '" +
                                  k.name() + "'");
        }
        return by_name;
      },
      nb::arg("path"), "The kernels a shared library exports (EAGLE_EXPORT_KERNELS), by name.");
}

}  // namespace eagle::python
