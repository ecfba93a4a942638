// Collectives: communicators made explicitly (an in-process CPU group, NCCL from an id the caller
// distributes) and the collectives as kernels.
#include <nanobind/stl/chrono.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstring>

#include "bindings.hpp"
#include "eagle/comm/collectives.hpp"
#include "eagle/comm/communicator.hpp"
#include "eagle/core/error.hpp"

namespace eagle::python {

void bind_comm(nb::module_& m) {
  nb::module_ c = m.def_submodule(
      "comm", "Collectives across ranks: an in-process CPU group (ranks are threads) or NCCL.");
  nb::exception<comm::TimeoutError>(c, "TimeoutError", m.attr("Error"));

  nb::class_<comm::Communicator>(c, "Communicator", "One rank's handle on a group.")
      .def_prop_ro("rank", &comm::Communicator::rank)
      .def_prop_ro("size", &comm::Communicator::size)
      .def_prop_ro("device", &comm::Communicator::device)
      .def_prop_ro("kind", &comm::Communicator::kind, "'cpu-group' or 'nccl'.")
      .def("__repr__", &comm::Communicator::describe);

  nb::enum_<comm::ReduceOp>(c, "ReduceOp", "How all_reduce and reduce_scatter combine ranks.")
      .value("sum", comm::ReduceOp::sum)
      .value("avg", comm::ReduceOp::avg)
      .value("max", comm::ReduceOp::max)
      .value("min", comm::ReduceOp::min);

  c.def(
      "cpu_group",
      [](int ranks, double timeout_s) {
        comm::CpuGroupOptions o;
        o.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
        return comm::cpu_group(ranks, o);
      },
      nb::arg("ranks"), nb::arg("timeout") = 60.0,
      "An in-process group: one Communicator per rank, each meant for its own thread. A rank "
      "waits `timeout` seconds at a collective for the others, then raises TimeoutError.");
  c.def("nccl_status", &comm::nccl_status, "Whether NCCL was loaded, from where, or why not.");
  c.def("nccl_available", &comm::nccl_available);
  c.def(
      "nccl_unique_id",
      [] {
        const comm::NcclId id = comm::nccl_unique_id();
        return nb::bytes(id.bytes.data(), id.bytes.size());
      },
      "A fresh ncclUniqueId (128 bytes) for a new group: send it to the other ranks yourself.");
  c.def(
      "nccl",
      [](nb::bytes id, int rank, int ranks, Device device) {
        if (id.size() != 128)
          throw InvalidArgument("nccl: id must be the 128 bytes of an ncclUniqueId, got " +
                                std::to_string(id.size()));
        comm::NcclId nid;
        std::memcpy(nid.bytes.data(), id.c_str(), 128);
        nb::gil_scoped_release release;  // blocks until every rank joined
        return comm::nccl(nid, rank, ranks, device);
      },
      nb::arg("id"), nb::arg("rank"), nb::arg("ranks"), nb::arg("device"),
      "Rank `rank` of the NCCL group `id` on GPU `device` (blocks until every rank joined).");
  c.def("nccl_group", &comm::nccl_group, nb::arg("devices"),
        nb::call_guard<nb::gil_scoped_release>(),
        "One process driving several GPUs: a communicator per device.");
  c.def("all_reduce", &comm::all_reduce, nb::arg("comm"), nb::arg("op") = comm::ReduceOp::sum,
        "The kernel out = op over ranks of x (in place with buffer=x).");
  c.def("reduce_scatter", &comm::reduce_scatter, nb::arg("comm"),
        nb::arg("op") = comm::ReduceOp::sum,
        "The kernel x [K n, ...] -> out [n, ...]: rank r's rows of the reduction.");
  c.def("all_gather", &comm::all_gather, nb::arg("comm"),
        "The kernel x [n, ...] -> out [K n, ...] holding every rank's x in rank order.");
  c.def("broadcast", &comm::broadcast, nb::arg("comm"), nb::arg("root"),
        "The kernel out = rank root's x on every rank.");
}

}  // namespace eagle::python
