// The two ways to take gradients: a reverse graph over a built forward graph (names through the
// forward's name map), and the reverse recorded into the forward's own recording (one launch per
// training step).
#include "eagle/diff/reverse.hpp"

#include <map>

#include "diff/reverse_pass.hpp"
#include "eagle/core/error.hpp"
#include "eagle/core/shape.hpp"
#include "eagle/kernel/standard.hpp"

namespace eagle::diff {

namespace {

void require_record(const Recording& rec, const std::string& who) {
  if (!rec.options().record)
    throw InvalidArgument(who +
                          ": the forward was recorded without RecordOptions{.record = true}; "
                          "record it with that option so it keeps its name map and saves what "
                          "the reverse pass reads");
}

void require_differentiable(const NodeArgInfo& v, const std::string& what) {
  if (!is_floating(v.dtype))
    throw InvalidArgument(what + " is " + std::string(dtype_name(v.dtype)) +
                          "; only floating-point arrays have gradients");
}

std::string known_names(const Recording& rec) {
  std::string all;
  for (const auto& [name, view] : rec.names()) all += (all.empty() ? "" : ", ") + name;
  return all.empty() ? "none" : all;
}

// A name of the forward's name map.
NodeArgInfo lookup(const Recording& rec, const std::string& name, const std::string& who,
                   const char* role) {
  auto it = rec.names().find(name);
  if (it == rec.names().end())
    throw InvalidArgument(who + ": " + role + " name '" + name +
                          "' is not in the graph's name map (params, externals, labeled "
                          "Recorder::empty arrays, results: " +
                          known_names(rec) +
                          "). A plain temporary has no array that survives the run: give it a "
                          "buffer= (write it into r.empty(shape, dtype, \"" +
                          name + "\") with buffer(...))");
  if (it->second.buffer < 0)
    throw InvalidArgument(who + ": " + role + " name '" + name +
                          "' names several arrays (labels must be unique to be used here)");
  return it->second;
}

int start_of(const Recording& rec, const std::vector<int>& order, const NodeArgInfo& v) {
  const BufferInfo& b = rec.buffers()[static_cast<std::size_t>(v.buffer)];
  if (b.kind != BufferKind::internal) return -1;  // what the caller's array holds at the start
  return detail::first_writer(rec, order, v.buffer);
}

NodeArgInfo view_of(const Value& v) {
  NodeArgInfo a;
  a.buffer = v.buffer();
  a.byte_offset = v.byte_offset();
  a.shape = v.shape();
  a.dtype = v.dtype();
  if (!v.is_contiguous()) a.strides = v.strides();
  Shape st = a.strides;
  a.bytes = [&] {
    if (st.empty()) return checked_numel(a.shape, "diff") * static_cast<int64_t>(itemsize(a.dtype));
    int64_t last = 0;
    for (std::size_t i = 0; i < a.shape.size(); ++i) {
      if (a.shape[i] == 0) return int64_t{0};
      last += (a.shape[i] - 1) * st[i];
    }
    return (last + 1) * static_cast<int64_t>(itemsize(a.dtype));
  }();
  return a;
}

Value ones_like(Recorder& r, const NodeArgInfo& v) {
  const Value out = r.empty(v.shape, v.dtype);
  r.call(kernels::fill(), {1.0}, buffer(out));
  return out;
}

}  // namespace

Graph reverse(const Graph& forward, const std::vector<Seed>& seeds,
              const std::vector<std::string>& wrt) {
  const std::string who = "diff::reverse";
  const Recording& rec = forward.recording();
  require_record(rec, who);
  if (!forward.built())
    throw InvalidArgument(who +
                          ": build the forward graph first (the reverse graph reads its arrays)");
  if (seeds.empty()) throw InvalidArgument(who + ": seeds is empty");
  const std::vector<int>& order = rec.top();
  std::vector<NodeArgInfo> seed_views;
  for (const Seed& s : seeds) {
    seed_views.push_back(lookup(rec, s.name, who, "seeds"));
    require_differentiable(seed_views.back(), who + ": seed '" + s.name + "'");
    if (s.cotangent.defined() && (s.cotangent.shape() != seed_views.back().shape ||
                                  s.cotangent.dtype() != seed_views.back().dtype))
      throw InvalidArgument(who + ": the cotangent of seed '" + s.name + "' is " +
                            std::string(dtype_name(s.cotangent.dtype())) +
                            shape_str(s.cotangent.shape()) + " but the seed is " +
                            std::string(dtype_name(seed_views.back().dtype)) +
                            shape_str(seed_views.back().shape));
  }
  std::vector<detail::Target> targets;
  for (const std::string& name : wrt) {
    const NodeArgInfo v = lookup(rec, name, who, "wrt");
    require_differentiable(v, who + ": wrt '" + name + "'");
    targets.push_back({v, start_of(rec, order, v)});
  }
  RecordingBuilder builder;
  Recorder& r = builder.recorder();
  std::map<int, Value> held;  // forward buffer -> an external over its built array
  const detail::ViewMap map = [&](const NodeArgInfo& v) {
    auto it = held.find(v.buffer);
    if (it == held.end()) {
      const std::string label =
          "forward " + rec.buffers()[static_cast<std::size_t>(v.buffer)].label;
      it = held.emplace(v.buffer, r.external(forward.buffer_array(v.buffer), label)).first;
    }
    return r.view(it->second.buffer(), it->second.byte_offset() + v.byte_offset, v.shape, v.dtype,
                  v.strides);
  };
  std::vector<detail::Seed> in;
  for (std::size_t i = 0; i < seeds.size(); ++i) {
    const Value c = seeds[i].cotangent.defined()
                        ? r.param("seed." + seeds[i].name, seeds[i].cotangent)
                        : ones_like(r, seed_views[i]);
    in.push_back({seed_views[i], c});
  }
  r.result(detail::record_reverse(r, rec, order, in, targets, map, who));
  Graph g = Graph::from(builder.finish());
  g.build(forward.device());
  return g;
}

std::vector<Value> gradients(Recorder& r, const std::vector<Value>& seeds,
                             const std::vector<Value>& wrt, const std::vector<Value>& cotangents) {
  const std::string who = "diff::gradients";
  const Recording& rec = r.recording();
  require_record(rec, who);
  if (!r.at_top_level())
    throw InvalidArgument(who +
                          ": call it at the top level of the recording, not inside a device "
                          "construct or fork branch");
  if (seeds.empty()) throw InvalidArgument(who + ": seeds is empty");
  if (!cotangents.empty() && cotangents.size() != seeds.size())
    throw InvalidArgument(who + ": " + std::to_string(cotangents.size()) + " cotangents for " +
                          std::to_string(seeds.size()) + " seeds (give none or one per seed)");
  std::vector<Value> out;
  r.without_saves([&] {
    const std::vector<int> order = rec.top();
    std::vector<detail::Seed> in;
    for (std::size_t i = 0; i < seeds.size(); ++i) {
      const NodeArgInfo v = view_of(seeds[i]);
      require_differentiable(v, who + ": seed " + std::to_string(i));
      if (!cotangents.empty() &&
          (cotangents[i].shape() != v.shape || cotangents[i].dtype() != v.dtype))
        throw InvalidArgument(who + ": cotangent " + std::to_string(i) + " is " +
                              std::string(dtype_name(cotangents[i].dtype())) +
                              shape_str(cotangents[i].shape()) + " but its seed is " +
                              std::string(dtype_name(v.dtype)) + shape_str(v.shape));
      in.push_back({v, cotangents.empty() ? ones_like(r, v) : cotangents[i]});
    }
    std::vector<detail::Target> targets;
    for (std::size_t i = 0; i < wrt.size(); ++i) {
      const NodeArgInfo v = view_of(wrt[i]);
      require_differentiable(v, who + ": wrt " + std::to_string(i));
      targets.push_back({v, start_of(rec, order, v)});
    }
    const detail::ViewMap map = [&](const NodeArgInfo& v) {
      return r.view(v.buffer, v.byte_offset, v.shape, v.dtype, v.strides);
    };
    out = detail::record_reverse(r, rec, order, in, targets, map, who);
    r.release_saves();
  });
  return out;
}

}  // namespace eagle::diff
