// Packed data: documents as byte-token segments, the look-ahead packing loader, the seed's zipf
// lengths. Batches come out as eagle Arrays on the CPU (share them with numpy or torch).
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <memory>

#include "bindings.hpp"
#include "eagle/core/error.hpp"
#include "eagle/data/documents.hpp"
#include "eagle/data/packing.hpp"
#include "eagle/data/zipf.hpp"

namespace eagle::python {

namespace {

template <class T>
Array host_array(const std::vector<T>& values) {
  return Array::from(values, {static_cast<int64_t>(values.size())}, Device::cpu());
}

nb::dict batch_dict(const data::PackedBatch& b) {
  nb::dict d;
  d["input_ids"] = host_array(b.input_ids);
  d["labels"] = host_array(b.labels);
  d["loss_mask"] = host_array(b.loss_mask);
  d["cu_seqlens"] = host_array(b.cu_seqlens);
  d["active_tokens"] = b.active_tokens;
  d["active_sequences"] = b.active_sequences;
  d["max_seqlen"] = b.max_seqlen;
  d["sources"] = b.sources;
  return d;
}

// A loader with the segments it cycles over (the source keeps a pointer to them).
struct PyLoader {
  std::shared_ptr<std::vector<data::Segment>> segments;
  std::unique_ptr<data::PackedLoader> loader;
};

}  // namespace

void bind_data(nb::module_& m) {
  nb::module_ d = m.def_submodule(
      "data", "Packed ragged batches: documents, the look-ahead loader, zipf lengths.");
  nb::class_<data::Segment>(d, "Segment", "One sequence a batch can hold, and where it came from.")
      .def(nb::init<>())
      .def(
          "__init__",
          [](data::Segment* s, std::vector<int32_t> tokens, std::string source) {
            new (s) data::Segment{std::move(tokens), std::move(source)};
          },
          nb::arg("tokens"), nb::arg("source") = "")
      .def_rw("tokens", &data::Segment::tokens)
      .def_rw("source", &data::Segment::source)
      .def("__len__", [](const data::Segment& s) { return s.tokens.size(); });
  d.def(
      "read_documents",
      [](const std::filesystem::path& root, int64_t segment_cap, int64_t max_tokens) {
        return data::read_documents(root, segment_cap, max_tokens);
      },
      nb::arg("root"), nb::arg("segment_cap"), nb::arg("max_tokens") = 0,
      "The text files under root, byte-tokenized, split into segments of at most segment_cap "
      "tokens (sorted path order: the same on every run).");
  d.def("zipf_lengths", &data::zipf_lengths, nb::arg("total"), nb::arg("n"), nb::arg("seed"),
        "n zipf(1.2) lengths >= 1 summing to total, deterministic across languages (the seed's "
        "get_zipf_tokens).");
  d.def(
      "cu_seqlens",
      [](const std::vector<int64_t>& lengths, int64_t slots) {
        return host_array(data::cu_seqlens(lengths, slots));
      },
      nb::arg("lengths"), nb::arg("slots"),
      "cu_seqlens [slots + 1] i32 of the lengths, the unused tail repeating the end.");
  nb::class_<PyLoader>(d, "PackedLoader",
                       "Packs segments into batches of at most `tokens` rows and `slots` "
                       "sequences, choosing from a look-ahead buffer of `lookahead` candidates.")
      .def(
          "__init__",
          [](PyLoader* self, std::vector<data::Segment> segments, int64_t tokens, int64_t slots,
             int64_t lookahead) {
            if (segments.empty()) throw InvalidArgument("PackedLoader: segments must not be empty");
            auto held = std::make_shared<std::vector<data::Segment>>(std::move(segments));
            auto loader = std::make_unique<data::PackedLoader>(
                data::cycle_segments(held.get()), data::BatchCapacity{tokens, slots}, lookahead);
            new (self) PyLoader{held, std::move(loader)};
          },
          nb::arg("segments"), nb::arg("tokens"), nb::arg("slots"), nb::arg("lookahead") = 64,
          "Cycles over `segments` (an epoch loop) for ever.")
      .def(
          "next", [](PyLoader& l) { return batch_dict(*l.loader->next()); },
          "The next batch: input_ids, labels, loss_mask [T], cu_seqlens [N + 1] (eagle Arrays "
          "on the CPU), active_tokens L, active_sequences M, max_seqlen, sources.");
}

}  // namespace eagle::python
