// The operation IR (op.Graph, Tensor, Node) and planning: the one plan list, inspection,
// selection, and execute with any arrays (eagle, numpy, torch, ...) in the variant pack.
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <chrono>

#include "bindings.hpp"
#include "eagle/core/error.hpp"
#include "eagle/engines/builtin.hpp"
#include "eagle/engines/cublaslt.hpp"
#include "eagle/engines/cudnn.hpp"
#include "eagle/engines/planned_kernel.hpp"
#include "eagle/op/graph.hpp"
#include "eagle/plan/plans.hpp"

namespace eagle::python {

namespace {

op::Attr to_attr(const std::string& name, nb::handle v) {
  if (nb::isinstance<nb::bool_>(v)) return nb::cast<bool>(v);
  if (nb::isinstance<nb::int_>(v)) return nb::cast<int64_t>(v);
  if (nb::isinstance<nb::float_>(v)) return nb::cast<double>(v);
  if (nb::isinstance<nb::str>(v)) return nb::cast<std::string>(v);
  if (nb::isinstance<DType>(v)) return nb::cast<DType>(v);
  if (nb::isinstance<nb::list>(v) || nb::isinstance<nb::tuple>(v)) return to_shape(v);
  throw InvalidArgument("attribute '" + name + "': " + nb::cast<std::string>(nb::str(v.type())) +
                        " is not an attribute type (bool, int, float, str, list of int, DType)");
}

op::Attrs to_attrs(const nb::dict& attrs) {
  op::Attrs out;
  for (auto [k, v] : attrs) {
    const std::string name = nb::cast<std::string>(k);
    out.emplace_back(name, to_attr(name, v));
  }
  return out;
}

nb::object attr_value(const op::Attr& a) {
  switch (a.type()) {
    case op::AttrType::boolean:
      return nb::cast(a.as_bool(""));
    case op::AttrType::integer:
      return nb::cast(a.as_int(""));
    case op::AttrType::real:
      return nb::cast(a.as_real(""));
    case op::AttrType::text:
      return nb::cast(a.as_text(""));
    case op::AttrType::integers:
      return shape_tuple(a.as_ints(""));
    case op::AttrType::dtype:
      return nb::cast(a.as_dtype(""));
  }
  return nb::none();
}

nb::dict ports_dict(const op::Ports& ports) {
  nb::dict d;
  for (const auto& [name, t] : ports) d[name.c_str()] = nb::cast(t);
  return d;
}

std::vector<plan::HeurMode> to_modes(const std::vector<std::string>& names) {
  std::vector<plan::HeurMode> modes;
  for (const auto& n : names) {
    if (n == "A")
      modes.push_back(plan::HeurMode::A);
    else if (n == "FALLBACK")
      modes.push_back(plan::HeurMode::FALLBACK);
    else if (n == "OPENSOURCE")
      modes.push_back(plan::HeurMode::OPENSOURCE);
    else
      throw InvalidArgument("modes: '" + n + "' is not a heuristic mode (A, FALLBACK, OPENSOURCE)");
  }
  return modes;
}

// A planned kernel's options: the modes, and autotune with plan::autotune's defaults or none.
engines::PlanningOptions planning_options(const std::vector<std::string>& modes, bool autotune,
                                          bool fuse_epilogues,
                                          const std::vector<std::string>& prefer) {
  engines::PlanningOptions o{to_modes(modes), std::nullopt, fuse_epilogues, prefer};
  if (autotune) o.autotune = plan::AutotuneOptions{};
  return o;
}

// A plan list with what execute needs besides the operands: the device and a workspace grown on
// demand (library handles are eager_handle's, one per thread and device).
struct PyPlans {
  plan::ExecutionPlans plans;
  Device device;
  Array workspace;
};

// The C++ object of an instance of exactly the bound class T (not a subclass), else null: one
// pointer comparison where nb::isinstance and nb::cast each search nanobind's type table, which
// execute would do for every operand of every call.
template <typename T>
const T* exact_instance(nb::handle h) {
  static PyTypeObject* const type = reinterpret_cast<PyTypeObject*>(nb::type<T>().ptr());
  return Py_TYPE(h.ptr()) == type ? nb::inst_ptr<T>(h) : nullptr;
}

int operand_position(const plan::OperandLayout& layout, nb::handle key) {
  if (const op::Tensor* t = exact_instance<op::Tensor>(key)) return layout.index_of(*t);
  if (nb::isinstance<op::Tensor>(key)) return layout.index_of(nb::cast<op::Tensor>(key));
  if (nb::isinstance<nb::int_>(key)) return layout.index_of(nb::cast<int64_t>(key));
  const std::string name = nb::cast<std::string>(key);
  for (int i = 0; i < layout.size(); ++i)
    if (layout.tensor_at(i).name() == name) return i;
  throw InvalidArgument("execute: no operand is named '" + name + "'");
}

// The variant pack of one execute call: each operand imported (zero copy) and placed.
struct Imported {
  plan::VariantPack pack;
  std::vector<Array> held;  // imported arrays, alive until the call is issued
  // Capsules (torch's, __dlpack__'s) the pack reads, unused: dropping one after the call hands
  // the memory back to its producer.
  std::vector<nb::object> capsules;
};

Imported import_operands(const plan::ExecutionPlans& plans, const nb::dict& operands,
                         const Stream& s) {
  Imported in{plan::VariantPack(plans.layout()), {}, {}};
  StreamMemo one_stream_query;
  for (auto [key, value] : operands) {
    const int at = operand_position(plans.layout(), key);
    if (const Array* a = exact_instance<Array>(value)) {  // the caller's dict keeps it alive
      in.pack.set_at(at, plan::Operand(*a));
    } else if (std::optional<plan::Operand> o = exchange_operand(value, &s)) {
      in.pack.set_at(at, *o);  // borrowed: the caller's dict keeps the tensor alive
    } else if (nb::object capsule = foreign_capsule(value, &s); capsule.is_valid()) {
      in.pack.set_at(at, operand_of_capsule(capsule));  // no Array: read from the capsule
      in.capsules.push_back(std::move(capsule));
    } else {
      in.held.push_back(to_array(value, &s));
      in.pack.set_at(at, plan::Operand(in.held.back()));
    }
  }
  return in;
}

// Issues the built plan on `s` (the GIL released while it does).
void issue(PyPlans& p, const plan::VariantPack& pack, const Stream& s) {
  const plan::ExecutionPlans& plans = p.plans;
  CallContext ctx = CallContext::on(s);
  const auto compiled = plans.compiled();
  std::shared_ptr<void> handle;
  if (const Library* library = compiled->library()) {
    handle = eager_handle(*library, s);
    ctx.handle = handle.get();
  }
  const std::size_t bytes = compiled->workspace_bytes();
  if (bytes > p.workspace.nbytes())
    p.workspace = Array::empty({static_cast<int64_t>(bytes)}, DType::u8, p.device);
  ctx.workspace = bytes > 0 ? p.workspace.data() : nullptr;
  ctx.workspace_bytes = bytes;
  nb::gil_scoped_release release;
  plans.execute(pack, ctx);
}

const Stream& stream_or_eager(const PyPlans& p, const Stream* stream) {
  return stream != nullptr ? *stream : eager_stream(p.device);
}

void execute(PyPlans& p, const nb::dict& operands, const Stream* stream) {
  const Stream& s = stream_or_eager(p, stream);
  issue(p, import_operands(p.plans, operands, s).pack, s);
}

// For bench/python/host_cost.py: ns per execute looped in C++ in bursts of 64 calls, each burst
// from a drained stream (the drain untimed), as the Python side times its calls. `imports`: each
// call imports the operands again (the whole of execute() but Python's call into it); otherwise
// they are imported once and only the issue is looped.
double bench_execute_calls(PyPlans& p, const nb::dict& operands, const Stream* stream,
                           int64_t calls, bool imports) {
  constexpr int64_t kBurst = 64;
  const Stream& s = stream_or_eager(p, stream);
  const Imported once = import_operands(p.plans, operands, s);
  double ns = 0;
  int64_t done = 0;
  while (done < calls) {
    s.synchronize();
    const auto start = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < kBurst; ++i) {
      if (imports)
        execute(p, operands, &s);
      else
        issue(p, once.pack, s);
    }
    ns +=
        std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
    done += kBurst;
  }
  s.synchronize();
  return ns / static_cast<double>(done);
}

}  // namespace

void bind_op(nb::module_& m) {
  nb::module_ op = m.def_submodule("op", "The operation IR: graphs of tensors and nodes.");
  nb::class_<op::Tensor>(op, "Tensor", "A tensor of one operation graph (a handle).")
      .def_prop_ro("uid", &op::Tensor::uid)
      .def_prop_ro("name", &op::Tensor::name)
      .def_prop_ro("dtype", &op::Tensor::dtype)
      .def_prop_ro("dims", [](const op::Tensor& t) { return shape_tuple(t.dims()); })
      .def_prop_ro("strides", [](const op::Tensor& t) { return shape_tuple(t.strides()); })
      .def_prop_ro("is_virtual", &op::Tensor::is_virtual)
      .def_prop_ro("producer", &op::Tensor::producer)
      .def("set_uid", &op::Tensor::set_uid, nb::arg("uid"), nb::rv_policy::reference)
      .def("set_name", &op::Tensor::set_name, nb::arg("name"), nb::rv_policy::reference)
      .def("set_dtype", &op::Tensor::set_dtype, nb::arg("dtype"), nb::rv_policy::reference)
      .def(
          "set_dims",
          [](op::Tensor& t, nb::handle d) -> op::Tensor& { return t.set_dims(to_shape(d)); },
          nb::arg("dims"), nb::rv_policy::reference)
      .def(
          "set_strides",
          [](op::Tensor& t, nb::handle d) -> op::Tensor& { return t.set_strides(to_shape(d)); },
          nb::arg("strides"), nb::rv_policy::reference)
      .def("set_output", &op::Tensor::set_output, nb::arg("is_output") = true,
           nb::rv_policy::reference)
      .def("set_ragged_offset", &op::Tensor::set_ragged_offset, nb::arg("offsets"),
           nb::rv_policy::reference)
      .def("__eq__", [](const op::Tensor& a, const op::Tensor& b) { return a == b; })
      .def("__hash__", [](const op::Tensor& t) { return t.uid(); })
      .def("__repr__", [](const op::Tensor& t) {
        return "eagle.op.Tensor('" + t.name() + "', uid " + std::to_string(t.uid()) + ")";
      });

  nb::class_<op::Node>(op, "Node", "A node of one operation graph (a handle).")
      .def_prop_ro("op", &op::Node::op)
      .def_prop_ro("name", &op::Node::name)
      .def_prop_ro("inputs", [](const op::Node& n) { return ports_dict(n.inputs()); })
      .def_prop_ro("outputs", [](const op::Node& n) { return ports_dict(n.outputs()); })
      .def_prop_ro("attrs", [](const op::Node& n) {
        nb::dict d;
        for (const auto& [k, v] : n.attrs()) d[k.c_str()] = attr_value(v);
        return d;
      });

  nb::class_<op::Graph>(op, "Graph",
                        "An operation graph: tensors and nodes from the op tables. Planning "
                        "freezes it.")
      .def(nb::init<std::string>(), nb::arg("name") = "graph")
      .def_prop_ro("name", &op::Graph::name)
      .def(
          "tensor",
          [](op::Graph& g, const std::string& name, nb::handle dims, DType dtype,
             nb::object strides, std::optional<int64_t> uid) {
            op::TensorSpec spec{name, to_shape(dims), dtype};
            if (!strides.is_none()) spec.strides = to_shape(strides);
            spec.uid = uid;
            return g.tensor(spec);
          },
          nb::arg("name"), nb::arg("dims"), nb::arg("dtype") = DType::f32,
          nb::arg("strides") = nb::none(), nb::arg("uid") = nb::none(), "A graph input.")
      .def(
          "op",
          [](op::Graph& g, const std::string& name, const nb::dict& inputs, const nb::dict& attrs,
             const std::string& node_name) {
            op::Ports ports;
            for (auto [k, v] : inputs)
              ports.emplace_back(nb::cast<std::string>(k), nb::cast<op::Tensor>(v));
            return g.op(name, ports, to_attrs(attrs), node_name);
          },
          nb::arg("op"), nb::arg("inputs"), nb::arg("attrs") = nb::dict(), nb::arg("name") = "",
          "Appends a node; returns its outputs by port name.")
      .def(
          "pointwise",
          [](op::Graph& g, const std::string& name, const op::Tensor& a,
             std::optional<op::Tensor> b, const nb::kwargs& attrs) {
            return b ? g.pointwise(name, a, *b, to_attrs(attrs))
                     : g.pointwise(name, a, to_attrs(attrs));
          },
          nb::arg("op"), nb::arg("a"), nb::arg("b") = nb::none(), nb::arg("attrs"))
      .def("where", &op::Graph::where, nb::arg("cond"), nb::arg("a"), nb::arg("b"))
      .def(
          "matmul",
          [](op::Graph& g, const op::Tensor& a, const op::Tensor& b,
             std::optional<op::Tensor> bias) {
            return g.matmul(a, b, bias.value_or(op::Tensor()));
          },
          nb::arg("a"), nb::arg("b"), nb::arg("bias") = nb::none())
      .def("validate", &op::Graph::validate)
      .def("clone", &op::Graph::clone)
      .def("freeze", &op::Graph::freeze)
      .def_prop_ro("frozen", &op::Graph::frozen)
      .def_prop_ro("tensors", &op::Graph::tensors)
      .def_prop_ro("nodes", &op::Graph::nodes)
      .def("tensor_by_uid", &op::Graph::tensor_by_uid, nb::arg("uid"))
      .def_prop_ro("operand_tensors", &op::Graph::operand_tensors)
      .def("to_json", &op::Graph::to_json);

  nb::class_<PyPlans>(m, "ExecutionPlans",
                      "The one ranked plan list of an operation graph for a device.")
      .def_prop_ro("count", [](const PyPlans& p) { return p.plans.count(); })
      .def_prop_ro("family", [](const PyPlans& p) { return p.plans.family(); })
      .def_prop_ro("device", [](const PyPlans& p) { return p.device; })
      .def(
          "name_at", [](const PyPlans& p, int i) { return p.plans.name_at(i); }, nb::arg("index"))
      .def(
          "engine_at", [](const PyPlans& p, int i) { return p.plans.at(i).engine_id; },
          nb::arg("index"))
      .def(
          "knobs_at", [](const PyPlans& p, int i) { return p.plans.at(i).knobs; }, nb::arg("index"))
      .def(
          "build_plan_at_index", [](PyPlans& p, int i) { p.plans.build_plan_at_index(i); },
          nb::arg("index"))
      .def(
          "select_plan", [](PyPlans& p, int i) { p.plans.select_plan(i); }, nb::arg("index"))
      .def_prop_ro("selected", [](const PyPlans& p) { return p.plans.selected(); })
      .def(
          "build_plans", [](PyPlans& p) { return p.plans.build_plans(); },
          "Keeps the first entry that builds (from the selected one); returns its index.")
      .def_prop_ro("declines", [](const PyPlans& p) { return p.plans.declines(); })
      .def_prop_ro("workspace_size", [](const PyPlans& p) { return p.plans.workspace_size(); })
      .def("describe", [](const PyPlans& p) { return p.plans.describe(); })
      .def("__len__", [](const PyPlans& p) { return p.plans.count(); })
      .def("execute", &execute, nb::arg("operands"), nb::arg("stream") = nb::none(),
           "Runs the built plan; operands maps each operand (op.Tensor, uid or name) to an "
           "array (eagle, numpy, torch, ... without copying). On a GPU it is issued on `stream` "
           "(default: eagle's stream for the device) and may still run on return.")
      .def("_bench_execute_calls", &bench_execute_calls, nb::arg("operands"),
           nb::arg("stream").none(), nb::arg("calls"), nb::arg("imports"),
           "Nanoseconds per execute looped in C++ in bursts of 64 from a drained stream (for the "
           "host-cost benchmark): with `imports` the operands are imported at each call, "
           "otherwise once.");

  m.def(
      "plan",
      [](const op::Graph& g, Device device, const std::vector<std::string>& modes) {
        return PyPlans{engines::create_execution_plans(g, device, to_modes(modes)), device, {}};
      },
      nb::arg("graph"), nb::arg("device"), nb::arg("modes") = std::vector<std::string>{"A"},
      "Plans `graph` for `device` against eagle's engines: the one ranked list.");
  m.def(
      "plan_for",
      [](const op::Graph& g, Device device, int64_t engine_id, const plan::Knobs& knobs) {
        return PyPlans{engines::create_execution_plan(g, device, engine_id, knobs), device, {}};
      },
      nb::arg("graph"), nb::arg("device"), nb::arg("engine_id"), nb::arg("knobs") = plan::Knobs{},
      "A one-entry plan list for a known (engine id, knobs).");
  m.def(
      "planned_kernel",
      [](const op::Graph& g, const std::vector<std::string>& modes, bool autotune,
         const std::vector<std::string>& prefer) {
        return engines::planned_kernel(g, planning_options(modes, autotune, false, prefer));
      },
      nb::arg("graph"), nb::arg("modes") = std::vector<std::string>{"A"},
      nb::arg("autotune") = false, nb::arg("prefer") = std::vector<std::string>{},
      "A Kernel calling `graph`, planned when a graph recording it is built. autotune=True: "
      "the plan entries that build are timed on the device first (on zero-filled scratch "
      "operands, once per device) and the fastest kept, for the kernel and its derivative's "
      "kernels; a graph reading cu_seqlens or ragged offsets keeps the list's order. prefer: "
      "engine names (or 'cudnn') tried first, in order, for the kernel and its derivative's "
      "kernels; one that does not serve a graph leaves it to the ranked list.");
  m.def(
      "planned_segments",
      [](const op::Graph& g, const std::vector<std::string>& modes, bool autotune,
         bool fuse_epilogues, const std::vector<std::string>& prefer) {
        nb::list out;
        for (engines::PlannedSegment& s : engines::planned_segments(
                 g, planning_options(modes, autotune, fuse_epilogues, prefer)))
          out.append(nb::make_tuple(s.kernel, s.inputs, s.outputs));
        return out;
      },
      nb::arg("graph"), nb::arg("modes") = std::vector<std::string>{"A"},
      nb::arg("autotune") = false, nb::arg("fuse_epilogues") = false,
      nb::arg("prefer") = std::vector<std::string>{},
      "`graph` cut into pieces one engine family serves on its own (each run of pointwise "
      "nodes one piece, every other node a piece of its own; with fuse_epilogues=True a matmul "
      "and the pointwise chain right after it one piece, its product an output too, fused where "
      "an engine serves it), for a graph no one engine serves on a GPU: a list of (Kernel, input "
      "uids, output uids) in an order that respects the data "
      "flow. Record the kernels' calls in order, each with the Values of its input uids, and "
      "map its outputs to its output uids; each piece differentiates on its own.");
  m.def("cudnn_status", &engines::cudnn_backend_status, "Whether cuDNN was found, and where.");
  m.def("cublaslt_status", &engines::cublaslt_status, "Whether cuBLASLt was found, and where.");
}

}  // namespace eagle::python
