// Value, Recorder and Branch: recording kernel calls and device constructs from Python. Arms and
// bodies are Python callables, run once while recording (both arms of a device condition).
#include "recording.hpp"

#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>

#include "eagle/core/error.hpp"
#include "eagle/diff/reverse.hpp"

namespace eagle::python {

Recorder& PyRecorder::get() const {
  if (!alive || !*alive)
    throw InvalidArgument(
        "Recorder: its recording has finished; a recorder is only valid inside the body it was "
        "handed to");
  return *recorder;
}

void run_body(Recorder& r, const nb::handle& fn) {
  PyRecorder handle{&r, std::make_shared<bool>(true)};
  struct Expire {
    std::shared_ptr<bool> alive;
    ~Expire() { *alive = false; }
  } expire{handle.alive};
  fn(nb::cast(handle));
}

namespace {

struct PyBranch {
  Branch branch;
  std::shared_ptr<bool> alive;
};

std::vector<Arg> to_args(const nb::sequence& args) {
  std::vector<Arg> out;
  int position = 0;
  for (nb::handle a : args) {
    if (nb::isinstance<Value>(a))
      out.emplace_back(nb::cast<Value>(a));
    else if (std::optional<Scalar> number = to_scalar(a))
      out.emplace_back(*number);
    else if (is_array_like(a))
      throw InvalidArgument(
          "call: argument " + std::to_string(position) +
          " is an array from outside the recording; bring it in as r.param(name, array) (bound "
          "by name, swapped by bind) or r.external(array, label) (read and written in place)");
    else
      throw InvalidArgument("call: argument " + std::to_string(position) +
                            " is neither a Value nor a number (" +
                            nb::cast<std::string>(nb::str(a.type())) + ")");
    ++position;
  }
  return out;
}

BufferArg to_buffer(nb::handle b) {
  if (nb::isinstance<Value>(b)) return nb::cast<Value>(b);
  return to_array(b);
}

CallOptions to_options(const nb::object& buffers, const std::string& label) {
  CallOptions o;
  o.label = label;
  if (buffers.is_none()) return o;
  if (nb::isinstance<Value>(buffers) || is_array_like(buffers)) {
    o.buffers.push_back(to_buffer(buffers));
  } else {
    for (nb::handle b : buffers) o.buffers.push_back(to_buffer(b));
  }
  return o;
}

std::function<void()> arm(const nb::object& fn) {
  if (fn.is_none()) return nullptr;
  return [fn] { fn(); };
}

nb::tuple values_tuple(const std::vector<Value>& values) {
  nb::list out;
  for (const Value& v : values) out.append(nb::cast(v));
  return nb::tuple(out);
}

struct PyScope {
  PyRecorder recorder;
  std::string name;
  std::unique_ptr<Recorder::Scope> scope;
};

}  // namespace

void bind_recording(nb::module_& m) {
  nb::class_<Value>(m, "Value",
                    "An array inside a recording: a view of one of the graph's buffers. It has "
                    "no memory until the graph is built.")
      .def_prop_ro("shape", [](const Value& v) { return shape_tuple(v.shape()); })
      .def_prop_ro("strides", [](const Value& v) { return shape_tuple(v.strides()); })
      .def_prop_ro("dtype", &Value::dtype)
      .def_prop_ro("numel", &Value::numel)
      .def_prop_ro("id", &Value::id)
      .def_prop_ro("buffer", &Value::buffer)
      .def_prop_ro("byte_offset", &Value::byte_offset)
      .def_prop_ro("is_contiguous", &Value::is_contiguous)
      .def_prop_ro("defined", &Value::defined)
      .def(
          "slice",
          [](const Value& v, int64_t a, int64_t b, std::optional<int64_t> c) {
            return c ? v.slice(static_cast<int>(a), b, *c) : v.slice(a, b);
          },
          nb::arg("begin"), nb::arg("end"), nb::arg("end2") = nb::none(),
          "slice(begin, end): rows [begin, end) of dimension 0; slice(dim, begin, end): of `dim` "
          "(a strided view unless dim is 0).")
      .def("transpose", &Value::transpose, nb::arg("d0"), nb::arg("d1"))
      .def(
          "reshape", [](const Value& v, nb::handle s) { return v.reshape(to_shape(s)); },
          nb::arg("shape"))
      .def(
          "broadcast_to", [](const Value& v, nb::handle s) { return v.broadcast_to(to_shape(s)); },
          nb::arg("shape"),
          "The value repeated to `shape` by numpy's rules (stride 0 where it repeats): a "
          "read-only view; a kernel writing it is refused.")
      .def("__bool__",
           [](const Value&) -> bool {
             throw RecordError(
                 "a Value's contents are decided on the device at every launch, so Python "
                 "cannot test it while recording: use it as the condition of an if / while / "
                 "match in an @eagle.Graph.builder function (or r.if_ / r.while_ / r.switch_)");
           })
      .def("__repr__", [](const Value& v) {
        std::string s = "eagle.Value(" + std::string(dtype_name(v.dtype())) + "[";
        for (size_t i = 0; i < v.shape().size(); ++i)
          s += (i ? "," : "") + std::to_string(v.shape()[i]);
        return s + "], id " + std::to_string(v.id()) + ")";
      });

  nb::class_<PyBranch>(m, "Branch", "One branch of Recorder.parallel.")
      .def_prop_ro("index", [](const PyBranch& b) { return b.branch.index(); })
      .def(
          "wait",
          [](PyBranch& b, const Value& v) {
            if (!*b.alive) throw InvalidArgument("Branch.wait: its recording has finished");
            b.branch.wait(v);
          },
          nb::arg("value"),
          "Orders this branch after the node that last wrote `value` (one ordering edge).");

  nb::class_<PyScope>(m, "_Scope")
      .def("__enter__",
           [](PyScope& s) {
             // Scope is neither copied nor moved: made in place from the prvalue.
             s.scope.reset(new Recorder::Scope(s.recorder.get().scope(s.name)));
             return nb::none();
           })
      .def("__exit__", [](PyScope& s, nb::args) {
        s.scope.reset();
        return false;
      });

  nb::class_<PyRecorder>(m, "Recorder",
                         "Records kernel calls and device constructs into a graph. Handed to a "
                         "recording body; every method is transactional (on an error the "
                         "recording is as it was).")
      .def(
          "param",
          [](const PyRecorder& r, const std::string& name, nb::handle array) {
            return r.get().param(name, to_array(array));
          },
          nb::arg("name"), nb::arg("array"),
          "A named argument bound to `array` until bind() swaps it; never written by the graph.")
      .def(
          "external",
          [](const PyRecorder& r, nb::handle array, const std::string& label) {
            return r.get().external(to_array(array), label);
          },
          nb::arg("array"), nb::arg("label"),
          "A caller's array the graph reads and writes directly at every launch.")
      .def(
          "empty",
          [](const PyRecorder& r, nb::handle shape, DType dtype, const std::string& label) {
            return r.get().empty(to_shape(shape), dtype, label);
          },
          nb::arg("shape"), nb::arg("dtype") = DType::f32, nb::arg("label") = "",
          "A new graph-owned array with unspecified contents.")
      .def(
          "constant",
          [](const PyRecorder& r, double value, DType dtype) {
            return r.get().constant(value, dtype);
          },
          nb::arg("value"), nb::arg("dtype") = DType::f32,
          "A one-element array holding `value`, filled once per device arm, fork branch or loop "
          "body (asking again there returns the same array); read only.")
      .def(
          "call",
          [](const PyRecorder& r, const Kernel& k, const nb::sequence& args,
             const nb::object& buffer, const std::string& label) {
            return r.get().call(k, to_args(args), to_options(buffer, label));
          },
          nb::arg("kernel"), nb::arg("args"), nb::arg("buffer") = nb::none(), nb::arg("label") = "",
          "Records a call of a kernel with exactly one output.")
      .def(
          "call_all",
          [](const PyRecorder& r, const Kernel& k, const nb::sequence& args,
             const nb::object& buffers, const std::string& label) {
            return values_tuple(r.get().call_all(k, to_args(args), to_options(buffers, label)));
          },
          nb::arg("kernel"), nb::arg("args"), nb::arg("buffers") = nb::none(),
          nb::arg("label") = "",
          "Records a call; returns every output (write-only ones, then read-write ones).")
      .def(
          "assign",
          [](const PyRecorder& r, Value& dst, const Value& src) {
            r.get().assign(dst, src);
            return dst;
          },
          nb::arg("dst"), nb::arg("src"),
          "Rebinds dst to src; inside a device construct merges src's new array in place into "
          "the one dst held. Returns what the name should hold now.")
      .def(
          "if_",
          [](const PyRecorder& r, const Value& cell, const nb::callable& then_arm,
             const nb::object& else_arm) { r.get().if_(cell, arm(then_arm), arm(else_arm)); },
          nb::arg("cell"), nb::arg("then_arm"), nb::arg("else_arm") = nb::none())
      .def(
          "switch_",
          [](const PyRecorder& r, const Value& cell, const std::vector<nb::callable>& arms) {
            std::vector<std::function<void()>> fns;
            for (const auto& a : arms) fns.push_back(arm(a));
            r.get().switch_(cell, fns);
          },
          nb::arg("cell"), nb::arg("arms"))
      .def(
          "while_",
          [](const PyRecorder& r, const Value& cell, const nb::callable& body, int64_t max_turns) {
            r.get().while_(cell, arm(body), max_turns);
          },
          nb::arg("cell"), nb::arg("body"), nb::arg("max_turns") = -1)
      .def(
          "for_",
          [](const PyRecorder& r, int64_t n, const nb::callable& body) {
            r.get().for_(n, arm(body));
          },
          nb::arg("n"), nb::arg("body"))
      .def(
          "break_if", [](const PyRecorder& r, const Value& c) { r.get().break_if(c); },
          nb::arg("cell"))
      .def(
          "continue_if", [](const PyRecorder& r, const Value& c) { r.get().continue_if(c); },
          nb::arg("cell"))
      .def(
          "if_chain",
          [](const PyRecorder& r, const std::vector<std::pair<Value, nb::callable>>& arms,
             const nb::object& else_arm) {
            std::vector<std::pair<Value, std::function<void()>>> fns;
            for (const auto& [cell, fn] : arms) fns.emplace_back(cell, arm(fn));
            r.get().if_chain(fns, arm(else_arm));
          },
          nb::arg("arms"), nb::arg("else_arm") = nb::none())
      .def(
          "parallel",
          [](const PyRecorder& r, const std::vector<nb::callable>& branches) {
            auto alive = std::make_shared<bool>(true);
            std::vector<std::function<void(Branch&)>> fns;
            for (const auto& fn : branches)
              fns.emplace_back([fn, alive](Branch& b) { fn(nb::cast(PyBranch{b, alive})); });
            try {
              r.get().parallel(fns);
            } catch (...) {
              *alive = false;
              throw;
            }
            *alive = false;
          },
          nb::arg("branches"),
          "A fork: each callable(branch) records one branch; they run concurrently.")
      .def(
          "result",
          [](const PyRecorder& r, nb::handle values) {
            if (nb::isinstance<Value>(values)) return r.get().result(nb::cast<Value>(values));
            std::vector<Value> vs;
            for (nb::handle v : values) vs.push_back(nb::cast<Value>(v));
            r.get().result(vs);
          },
          nb::arg("values"), "What g() returns.")
      .def(
          "check",
          [](const PyRecorder& r, const Value& flags, std::function<void(const Array&)> raise) {
            r.get().check(flags, std::move(raise));
          },
          nb::arg("flags"), nb::arg("raise_"),
          "A device check: after each g(), raise_(flags array) may raise what it found.")
      .def(
          "scope",
          [](const PyRecorder& r, const std::string& name) {
            r.get();
            return PyScope{r, name, nullptr};
          },
          nb::arg("name"), "with r.scope('block0'): names the nodes recorded inside.")
      .def("at_top_level", [](const PyRecorder& r) { return r.get().at_top_level(); })
      .def(
          "gradients",
          [](const PyRecorder& r, const std::vector<Value>& seeds, const std::vector<Value>& wrt,
             const std::vector<Value>& cotangents) {
            return values_tuple(diff::gradients(r.get(), seeds, wrt, cotangents));
          },
          nb::arg("seeds"), nb::arg("wrt"), nb::arg("cotangents") = std::vector<Value>{},
          "Records the reverse of everything recorded so far (record=True) and returns the "
          "gradients of `wrt`.");
}

}  // namespace eagle::python
