// Graph: record, build, run (g(), g(n), launch), bind by name, introspection and traces.
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>

#include "eagle/core/error.hpp"
#include "eagle/diff/reverse.hpp"
#include "eagle/exec/graph.hpp"
#include "eagle/exec/trace.hpp"
#include "recording.hpp"

namespace eagle::python {

namespace {

nb::dict arg_dict(const NodeArgInfo& a) {
  nb::dict d;
  d["param"] = a.param;
  d["access"] = std::string(access_name(a.access));
  d["buffer"] = a.buffer;
  d["byte_offset"] = a.byte_offset;
  d["shape"] = shape_tuple(a.shape);
  d["dtype"] = a.dtype;
  return d;
}

nb::dict node_dict(const NodeInfo& n) {
  nb::dict d;
  d["id"] = n.id;
  d["kind"] = std::string(node_kind_name(n.kind));
  d["label"] = n.label;
  d["kernel"] = n.kernel;
  nb::list arrays;
  for (const auto& a : n.arrays) arrays.append(arg_dict(a));
  d["arrays"] = arrays;
  d["deps"] = n.deps;
  d["waits"] = n.waits;
  d["bodies"] = n.bodies;
  d["parent"] = n.parent;
  d["scope"] = n.scope;
  d["max_turns"] = n.max_turns;
  return d;
}

nb::dict buffer_dict(const BufferInfo& b) {
  nb::dict d;
  d["id"] = b.id;
  d["label"] = b.label;
  d["kind"] = std::string(buffer_kind_name(b.kind));
  d["shape"] = shape_tuple(b.shape);
  d["dtype"] = b.dtype;
  d["bytes"] = b.bytes;
  return d;
}

nb::dict event_dict(const TraceEvent& e) {
  nb::dict d;
  d["node"] = e.node;
  d["label"] = e.label;
  d["scope"] = e.scope;
  d["kernel"] = e.kernel;
  d["launch"] = e.launch;
  d["thread"] = e.thread;
  d["begin_ns"] = e.begin_ns;
  d["end_ns"] = e.end_ns;
  d["device_kernel"] = e.device_kernel;
  return d;
}

std::vector<TraceEvent> to_events(const nb::sequence& events) {
  std::vector<TraceEvent> out;
  for (nb::handle h : events) {
    nb::dict d = nb::cast<nb::dict>(h);
    TraceEvent e;
    e.node = nb::cast<int>(d["node"]);
    e.label = nb::cast<std::string>(d["label"]);
    e.scope = nb::cast<std::string>(d["scope"]);
    e.kernel = nb::cast<std::string>(d["kernel"]);
    e.launch = nb::cast<int64_t>(d["launch"]);
    e.thread = nb::cast<int>(d["thread"]);
    e.begin_ns = nb::cast<int64_t>(d["begin_ns"]);
    e.end_ns = nb::cast<int64_t>(d["end_ns"]);
    if (d.contains("device_kernel")) e.device_kernel = nb::cast<std::string>(d["device_kernel"]);
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace

void bind_graph(nb::module_& m) {
  nb::class_<Graph>(m, "_Graph")
      .def_static(
          "record",
          [](const nb::callable& body, bool record) {
            return Graph::record([&](Recorder& r) { run_body(r, body); },
                                 RecordOptions{.record = record});
          },
          nb::arg("body"), nb::arg("record") = false)
      .def(
          "build",
          [](Graph& g, std::optional<Device> device, int threads, bool plain_if_only,
             std::optional<uintptr_t> stream, bool prioritize_chains, bool memsets_as_kernels,
             bool defer_side_roots) {
            BuildOptions o;
            o.threads = threads;
            o.plain_if_only = plain_if_only;
            o.prioritize_chains = prioritize_chains;
            o.memsets_as_kernels = memsets_as_kernels;
            o.defer_side_roots = defer_side_roots;
            if (stream) {
              if (!device)
                throw InvalidArgument("build: stream= needs a device (build(device, stream=...))");
              // Borrowed: the caller's stream (torch's, say) stays the caller's to keep alive.
              o.stream = std::make_shared<Stream>(
                  Stream::borrow(*device, reinterpret_cast<void*>(*stream)));
            }
            nb::gil_scoped_release release;
            if (device)
              g.build(*device, o);
            else if (threads == 0 && !plain_if_only && !prioritize_chains && !defer_side_roots)
              g.build();
            else
              throw InvalidArgument("build: options need a device (build(device, ...))");
          },
          nb::arg("device") = nb::none(), nb::arg("threads") = 0, nb::arg("plain_if_only") = false,
          nb::arg("stream") = nb::none(), nb::arg("prioritize_chains") = false,
          nb::arg("memsets_as_kernels") = true, nb::arg("defer_side_roots") = false)
      .def_prop_ro("built", &Graph::built)
      .def_prop_ro("device", &Graph::device)
      .def_prop_ro("backend", &Graph::backend)
      .def_prop_ro("schedule", &Graph::schedule)
      .def_prop_ro("native_node_count", &Graph::native_node_count)
      .def_prop_ro("allocated_bytes", &Graph::allocated_bytes)
      .def_prop_ro("workspace_bytes", &Graph::workspace_bytes)
      .def_prop_ro("saved_bytes", &Graph::saved_bytes)
      .def_prop_ro("rebuild_count", &Graph::rebuild_count)
      .def_prop_ro("param_names", [](const Graph& g) { return g.recording().param_names(); })
      .def_prop_ro("nodes",
                   [](const Graph& g) {
                     nb::list out;
                     for (const auto& n : g.nodes()) out.append(node_dict(n));
                     return out;
                   })
      .def_prop_ro("buffers",
                   [](const Graph& g) {
                     nb::list out;
                     for (const auto& b : g.recording().buffers()) out.append(buffer_dict(b));
                     return out;
                   })
      .def_prop_ro("edges", &Graph::edges)
      .def("to_json", &Graph::to_json)
      .def("to_dot", &Graph::to_dot)
      .def(
          "run", [](Graph& g, int n) { g(n); }, nb::arg("n") = 1,
          nb::call_guard<nb::gil_scoped_release>(),
          "n launches and one wait, then the device checks.")
      .def("launch", &Graph::launch, nb::arg("n") = 1, nb::call_guard<nb::gil_scoped_release>())
      .def("synchronize", &Graph::synchronize, nb::call_guard<nb::gil_scoped_release>())
      .def("results", [](const Graph& g) { return g.results(); })
      .def(
          "bind",
          [](Graph& g, const std::string& name, nb::handle array) {
            // Imported on the graph's stream: the producer's pending work is ordered before it.
            g.bind(name, to_array(array, &g.stream()));
          },
          nb::arg("name"), nb::arg("array"))
      .def("stream", &Graph::stream, nb::rv_policy::reference_internal)
      .def_prop_ro("native_graph",
                   [](const Graph& g) { return reinterpret_cast<uintptr_t>(g.native_graph()); })
      .def_prop_ro(
          "native_graph_exec",
          [](const Graph& g) { return reinterpret_cast<uintptr_t>(g.native_graph_exec()); })
      .def("set_tracing", &Graph::set_tracing, nb::arg("on"))
      .def("trace",
           [](const Graph& g) {
             nb::list out;
             for (const auto& e : g.trace()) out.append(event_dict(e));
             return out;
           })
      .def("clear_trace", &Graph::clear_trace)
      .def("set_warning_handler", &Graph::set_warning_handler, nb::arg("handler"));

  m.def(
      "chrome_trace_json",
      [](const nb::sequence& events, const std::string& process) {
        return chrome_trace_json(to_events(events), process);
      },
      nb::arg("events"), nb::arg("process") = "eagle",
      "The Chrome / Perfetto trace-event JSON of Graph.trace()'s events.");
}

void bind_diff(nb::module_& m) {
  m.def(
      "_reverse",
      [](const Graph& forward, const nb::sequence& seeds, const std::vector<std::string>& wrt) {
        std::vector<diff::Seed> s;
        for (nb::handle h : seeds) {
          if (nb::isinstance<nb::str>(h)) {
            s.emplace_back(nb::cast<std::string>(h));
          } else {
            nb::tuple t = nb::cast<nb::tuple>(h);
            s.emplace_back(nb::cast<std::string>(t[0]), to_array(t[1]));
          }
        }
        return diff::reverse(forward, s, wrt);
      },
      nb::arg("forward"), nb::arg("seeds"), nb::arg("wrt"));
}

}  // namespace eagle::python
