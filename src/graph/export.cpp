// Introspection exports of a recording: JSON for tools, DOT for people.
#include <sstream>

#include "eagle/graph/recording.hpp"
#include "graph/state.hpp"
#include "util/json.hpp"

namespace eagle {

using detail::json_quote;

namespace {

std::string shape_json(const Shape& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

}  // namespace

std::string Recording::to_json() const {
  std::ostringstream o;
  o << "{\n  \"params\": [";
  for (std::size_t i = 0; i < s_->param_names.size(); ++i)
    o << (i ? ", " : "") << json_quote(s_->param_names[i]);
  o << "],\n  \"arrays\": [";
  for (std::size_t i = 0; i < s_->buffers.size(); ++i) {
    const BufferInfo& b = s_->buffers[i];
    o << (i ? "," : "") << "\n    {\"id\": " << b.id << ", \"label\": " << json_quote(b.label)
      << ", \"kind\": " << json_quote(buffer_kind_name(b.kind))
      << ", \"dtype\": " << json_quote(dtype_name(b.dtype))
      << ", \"shape\": " << shape_json(b.shape) << ", \"bytes\": " << b.bytes;
    if (b.shadow_of >= 0) o << ", \"copy_of\": " << b.shadow_of;
    if (b.merged_into >= 0) o << ", \"merged_into\": " << b.merged_into;
    o << "}";
  }
  o << "\n  ],\n  \"nodes\": [";
  for (std::size_t i = 0; i < s_->nodes.size(); ++i) {
    const NodeInfo& n = s_->nodes[i];
    o << (i ? "," : "") << "\n    {\"id\": " << n.id << ", \"label\": " << json_quote(n.label)
      << ", \"kind\": " << json_quote(node_kind_name(n.kind))
      << ", \"kernel\": " << json_quote(n.kernel) << ", \"parent\": " << n.parent;
    if (!n.scope.empty()) o << ", \"scope\": " << json_quote(n.scope);
    o << ", \"args\": [";
    for (std::size_t j = 0; j < n.arrays.size(); ++j) {
      const NodeArgInfo& a = n.arrays[j];
      o << (j ? ", " : "") << "{\"param\": " << json_quote(a.param)
        << ", \"access\": " << json_quote(access_name(a.access)) << ", \"array\": " << a.buffer
        << ", \"byte_offset\": " << a.byte_offset << ", \"bytes\": " << a.bytes << "}";
    }
    o << "], \"deps\": " << shape_json(Shape(n.deps.begin(), n.deps.end()));
    if (!n.bodies.empty()) {
      o << ", \"bodies\": [";
      for (std::size_t b = 0; b < n.bodies.size(); ++b)
        o << (b ? ", " : "") << shape_json(Shape(n.bodies[b].begin(), n.bodies[b].end()));
      o << "]";
    }
    o << "}";
  }
  o << "\n  ],\n  \"edges\": [";
  const auto e = edges();
  for (std::size_t i = 0; i < e.size(); ++i)
    o << (i ? ", " : "") << "[" << e[i].first << ", " << e[i].second << "]";
  o << "],\n  \"results\": [";
  for (std::size_t i = 0; i < s_->results.size(); ++i)
    o << (i ? ", " : "") << "{\"array\": " << s_->results[i].buffer
      << ", \"byte_offset\": " << s_->results[i].byte_offset
      << ", \"shape\": " << shape_json(s_->results[i].shape) << "}";
  o << "]\n}\n";
  return o.str();
}

std::string Recording::to_dot() const {
  std::ostringstream o;
  o << "digraph eagle {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\"];\n";
  for (const NodeInfo& n : s_->nodes)
    o << "  n" << n.id << " [label=" << json_quote(std::to_string(n.id) + ": " + n.label) << "];\n";
  for (const NodeInfo& n : s_->nodes) {
    for (int d : n.deps) {
      // Label the edge with the arrays that order the two nodes.
      std::string via;
      for (const NodeArgInfo& a : n.arrays)
        for (const NodeArgInfo& b : s_->nodes[d].arrays)
          if (a.buffer == b.buffer && via.find(s_->buffers[a.buffer].label) == std::string::npos)
            via += (via.empty() ? "" : ", ") + s_->buffers[a.buffer].label;
      o << "  n" << d << " -> n" << n.id << " [label=" << json_quote(via) << "];\n";
    }
  }
  // Arms: a dashed edge from a control node to the first nodes of each arm.
  for (const NodeInfo& n : s_->nodes)
    for (std::size_t b = 0; b < n.bodies.size(); ++b)
      for (int child : n.bodies[b])
        if (s_->nodes[child].deps.empty())
          o << "  n" << n.id << " -> n" << child
            << " [style=dashed, label=" << json_quote("arm " + std::to_string(b)) << "];\n";
  o << "}\n";
  return o.str();
}

}  // namespace eagle
