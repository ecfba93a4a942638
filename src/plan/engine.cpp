#include "eagle/plan/engine.hpp"

#include <algorithm>

#include "eagle/core/error.hpp"

namespace eagle::plan {

std::string_view heur_mode_name(HeurMode mode) {
  switch (mode) {
    case HeurMode::A:
      return "A";
    case HeurMode::FALLBACK:
      return "FALLBACK";
    case HeurMode::OPENSOURCE:
      return "OPENSOURCE";
  }
  return "?";
}

std::string Facts::describe() const {
  std::string out = "ops [";
  for (std::size_t i = 0; i < ops.size(); ++i) out += (i ? "," : "") + ops[i];
  out += "], io dtype ";
  out += dtype_name(io_dtype);
  return out;
}

void describe_graph(const op::Graph& graph, Facts& facts) {
  for (const op::Node& n : graph.nodes()) facts.ops.push_back(n.op());
  for (const op::Tensor& t : graph.tensors())
    if (t.producer() < 0 && is_floating(t.dtype())) {
      facts.io_dtype = t.dtype();
      break;
    }
}

std::shared_ptr<const Facts> base_facts(const op::Graph& graph) {
  auto f = std::make_shared<Facts>();
  describe_graph(graph, *f);
  return f;
}

std::shared_ptr<const Facts> facts_for(const op::Graph& graph, Analyzer analyzer) {
  // Keyed by the analyzer itself: ranking and engines reach one record with no name to share.
  auto record = graph.memo(reinterpret_cast<const void*>(analyzer),
                           [&] { return std::shared_ptr<const void>(analyzer(graph)); });
  return std::static_pointer_cast<const Facts>(record);
}

std::string Capabilities::mismatch(const Facts& facts, const DeviceProperties& d) const {
  const bool on_cuda = d.device.rfind("cuda", 0) == 0;
  if (on_cuda != (device == DeviceKind::cuda))
    return std::string("runs on ") + (device == DeviceKind::cuda ? "CUDA devices" : "the CPU") +
           ", not on " + d.device;
  if (on_cuda && (d.sm < sm_lo || d.sm > sm_hi))
    return "serves sm " + std::to_string(sm_lo) + " to " + std::to_string(sm_hi) + ", not sm " +
           std::to_string(d.sm);
  if (std::find(dtypes.begin(), dtypes.end(), facts.io_dtype) == dtypes.end())
    return "does not serve io dtype " + std::string(dtype_name(facts.io_dtype));
  return "";
}

std::string Capabilities::knob_error(const Knobs& k) const {
  for (const auto& [name, domain] : knobs) {
    auto it = k.find(name);
    if (it == k.end()) return "knob '" + name + "' is not named (a config names every axis)";
    if (std::find(domain.begin(), domain.end(), it->second) == domain.end())
      return "knob '" + name + "' = " + std::to_string(it->second) + " is outside its domain";
  }
  for (const auto& [name, value] : k)
    if (!knobs.count(name)) return "knob '" + name + "' is not declared by the engine";
  return "";
}

std::vector<Knobs> Capabilities::points() const {
  std::vector<Knobs> out = {{}};
  for (const auto& [name, domain] : knobs) {
    std::vector<Knobs> next;
    for (const Knobs& p : out)
      for (int64_t v : domain) {
        Knobs k = p;
        k[name] = v;
        next.push_back(std::move(k));
      }
    out = std::move(next);
  }
  return out;
}

Knobs Capabilities::first_point() const {
  Knobs k;
  for (const auto& [name, domain] : knobs)
    if (!domain.empty()) k[name] = domain.front();
  return k;
}

}  // namespace eagle::plan
