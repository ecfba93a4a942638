// Ragged batches (capacity bounds, the recorded cu_seqlens check) and capacity buckets.
#include <nanobind/stl/function.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "eagle/core/error.hpp"
#include "eagle/exec/bucket_set.hpp"
#include "eagle/ragged/capacity.hpp"
#include "eagle/ragged/validate.hpp"
#include "recording.hpp"

// A BucketSet holds its graphs (move-only) in a vector, which the type traits call copyable.
template <>
struct nanobind::detail::is_copy_constructible<eagle::BucketSet> : std::false_type {};

namespace eagle::python {

void bind_ragged(nb::module_& m) {
  nb::module_ rg = m.def_submodule("ragged", "Packed (THD) batches described by cu_seqlens.");
  rg.def("max_sequences", &ragged::max_sequences, nb::arg("tokens"), nb::arg("slots"));
  rg.def("chunk_capacity", &ragged::chunk_capacity, nb::arg("tokens"), nb::arg("slots"),
         nb::arg("chunk"),
         "G_cap(T, N, C): the most chunks of C tokens any batch of <= T tokens in N slots has.");
  rg.def("seqlen_buckets", &ragged::seqlen_buckets, nb::arg("tokens"), nb::arg("smallest"),
         "min(S0 * 2^i, T) up to T: the per-sequence bounds a seqlen_bucket switch picks from.");
  rg.def("checks_enabled", &ragged::checks_enabled);
  rg.def(
      "validate",
      [](const PyRecorder& r, const Value& cu_seqlens, int64_t tokens, const std::string& what) {
        return ragged::validate(r.get(), cu_seqlens, tokens, what);
      },
      nb::arg("recorder"), nb::arg("cu_seqlens"), nb::arg("tokens"), nb::arg("what") = "cu_seqlens",
      "Records the device-side cu_seqlens check: g() raises InvalidArgument on a bad batch.");

  nb::class_<BucketResults>(m, "BucketResults",
                            "A bucket run's results, valid until the set's next launch.")
      .def("__getitem__", [](const BucketResults& r, size_t i) { return r[i]; })
      .def("__len__", &BucketResults::size)
      .def_prop_ro("bucket", &BucketResults::bucket)
      .def_prop_ro("capacity", &BucketResults::capacity)
      .def_prop_ro("generation", &BucketResults::generation)
      .def_prop_ro("valid", &BucketResults::valid);

  nb::class_<BucketSet::Bucket>(m, "Bucket", "What one bucket's recording sees.")
      .def_ro("index", &BucketSet::Bucket::index)
      .def_ro("capacity", &BucketSet::Bucket::capacity)
      .def("input", &BucketSet::Bucket::input, nb::arg("name"),
           "Input `name` as this bucket's param array: r.param(name, b.input(name)).");

  nb::class_<BucketSet>(m, "BucketSet",
                        "Graphs recorded from one body for capacities T_1 < ... < T_k, sharing "
                        "one memory arena; run(L) replays the smallest T_b >= L.")
      .def(
          "__init__",
          [](BucketSet* self, const std::vector<int64_t>& capacities, const nb::sequence& inputs,
             Device device, const nb::callable& body, bool record) {
            std::vector<BucketSet::Input> in;
            for (nb::handle h : inputs) {
              nb::tuple t = nb::cast<nb::tuple>(h);
              if (t.size() < 3 || t.size() > 4)
                throw InvalidArgument(
                    "BucketSet: each input is (name, shape, dtype[, follows_capacity])");
              in.push_back({nb::cast<std::string>(t[0]), to_shape(t[1]), nb::cast<DType>(t[2]),
                            t.size() == 4 ? nb::cast<bool>(t[3]) : true});
            }
            new (self) BucketSet(
                capacities, in, device,
                [&](Recorder& r, const BucketSet::Bucket& b) {
                  run_body(r, nb::cpp_function([&body, &b](nb::handle rec) {
                             body(rec, nb::cast(b, nb::rv_policy::reference));
                           }));
                },
                RecordOptions{.record = record});
          },
          nb::arg("capacities"), nb::arg("inputs"), nb::arg("device"), nb::arg("body"),
          nb::arg("record") = false)
      .def("select", &BucketSet::select, nb::arg("active"))
      .def("backing", &BucketSet::backing, nb::arg("name"), nb::rv_policy::reference_internal)
      .def("run", &BucketSet::run, nb::arg("active"), nb::call_guard<nb::gil_scoped_release>())
      .def("launch", &BucketSet::launch, nb::arg("active"),
           nb::call_guard<nb::gil_scoped_release>())
      .def_prop_ro("capacities", &BucketSet::capacities)
      .def("graph", &BucketSet::graph, nb::arg("bucket"), nb::rv_policy::reference_internal)
      .def_prop_ro("device", &BucketSet::device)
      .def_prop_ro("generation", &BucketSet::generation)
      .def_prop_ro("arena_bytes", &BucketSet::arena_bytes)
      .def_prop_ro("backing_bytes", &BucketSet::backing_bytes)
      .def_prop_ro("largest_alone_bytes", &BucketSet::largest_alone_bytes)
      .def("stream", &BucketSet::stream, nb::rv_policy::reference_internal,
           "The eagle.Stream every graph of the set launches on (one launch at a time).");
}

}  // namespace eagle::python
