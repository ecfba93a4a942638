// The passes that seal a recording: results resolved, written params shadowed, nodes numbered
// in program order, edges inferred. Each is linear (or near-linear) in the recording's size.
#include <functional>

#include "eagle/core/error.hpp"
#include "graph/state.hpp"

namespace eagle {

// A param the graph writes gets a private copy. The copy_in goes right before the first
// top-level item that writes the param (a whole loop, if the write is inside one); from that
// item on every access goes to the copy, so a loop's later turns see what earlier ones wrote.
// Nodes before it keep reading the param itself.
namespace {

// For every node, the position of the top-level item holding it.
std::vector<int> top_item_of(const Recording::State& s) {
  std::vector<int> item_of(s.nodes.size(), -1);
  std::function<void(int, int)> mark = [&](int id, int item) {
    item_of[static_cast<std::size_t>(id)] = item;
    for (const auto& body : s.nodes[static_cast<std::size_t>(id)].bodies)
      for (int child : body) mark(child, item);
  };
  for (std::size_t t = 0; t < s.top.size(); ++t) mark(s.top[t], static_cast<int>(t));
  return item_of;
}

// For every param buffer, the first top-level item that writes it (-1: none does).
std::vector<int> first_writes(const Recording::State& s, const std::vector<int>& item_of) {
  std::vector<int> first_write(s.buffers.size(), -1);
  for (const NodeInfo& n : s.nodes) {
    for (const NodeArgInfo& a : n.arrays) {
      if (!writes(a.access) ||
          s.buffers[static_cast<std::size_t>(a.buffer)].kind != BufferKind::param)
        continue;
      int& first = first_write[static_cast<std::size_t>(a.buffer)];
      const int item = item_of[static_cast<std::size_t>(n.id)];
      if (first < 0 || item < first) first = item;
    }
  }
  return first_write;
}

}  // namespace

// Gives `param` its private copy from top-level item `first` on; returns the copy_in node.
int Recording::State::shadow_param(int param, int first, const std::vector<int>& item_of) {
  const BufferInfo p = buffers[static_cast<std::size_t>(param)];
  const int shadow = new_buffer(BufferKind::internal, p.shape, p.dtype, p.label + ".copy");
  buffers[static_cast<std::size_t>(shadow)].shadow_of = param;
  scope[static_cast<std::size_t>(shadow)] = {-1, -1};
  for (int id : nodes_of_buffer[static_cast<std::size_t>(param)]) {
    if (item_of[static_cast<std::size_t>(id)] < first) continue;
    for (NodeArgInfo& a : nodes[static_cast<std::size_t>(id)].arrays)
      if (a.buffer == param) a.buffer = shadow;
  }
  for (NodeArgInfo& r : results)
    if (r.buffer == param) r.buffer = shadow;
  NodeInfo copy;
  copy.kind = NodeKind::copy_in;
  copy.label = "copy_in " + p.label;
  copy.kernel = "copy_in";
  const auto bytes = static_cast<int64_t>(p.bytes);
  copy.arrays = {{"src", Access::read, param, 0, bytes, p.shape, p.dtype},
                 {"dst", Access::write, shadow, 0, bytes, p.shape, p.dtype}};
  const int id = add_node(std::move(copy), nullptr, KernelImpl{});
  top.pop_back();  // add_node appended it; the caller places it
  return id;
}

// A param the graph writes gets a private copy. The copy_in goes right before the first
// top-level item that writes the param (a whole loop, if the write is inside one); from that
// item on every access goes to the copy, so a loop's later turns see what earlier ones wrote.
// Nodes before it keep reading the param itself.
void Recording::State::shadow_written_params() {
  const std::vector<int> item_of = top_item_of(*this);
  const std::vector<int> first_write = first_writes(*this, item_of);
  std::vector<std::vector<int>> insert_before(top.size());  // copies, by the item they precede
  const int param_buffers = static_cast<int>(buffers.size());
  for (int param = 0; param < param_buffers; ++param) {
    const int first = first_write[static_cast<std::size_t>(param)];
    if (first >= 0)
      insert_before[static_cast<std::size_t>(first)].push_back(shadow_param(param, first, item_of));
  }
  std::vector<int> reordered;
  reordered.reserve(top.size() + nodes.size());
  for (std::size_t t = 0; t < top.size(); ++t) {
    for (int id : insert_before[t]) reordered.push_back(id);
    reordered.push_back(top[t]);
  }
  top = std::move(reordered);
}

// Node ids in program order (a control node before its bodies), so ids read as a schedule.
void Recording::State::renumber() {
  std::vector<int> order;
  order.reserve(nodes.size());
  std::function<void(const std::vector<int>&)> visit = [&](const std::vector<int>& list) {
    for (int id : list) {
      order.push_back(id);
      for (const auto& body : nodes[static_cast<std::size_t>(id)].bodies) visit(body);
    }
  };
  visit(top);
  std::vector<int> new_id(nodes.size());
  for (std::size_t i = 0; i < order.size(); ++i)
    new_id[static_cast<std::size_t>(order[i])] = static_cast<int>(i);
  std::vector<NodeInfo> renumbered(nodes.size());
  std::vector<std::vector<Snapshot>> snaps(nodes.size());
  std::vector<std::unique_ptr<Kernel>> k(nodes.size());
  std::vector<KernelImpl> im(nodes.size());
  for (std::size_t old = 0; old < nodes.size(); ++old) {
    NodeInfo n = std::move(nodes[old]);
    n.id = new_id[old];
    if (n.parent >= 0) n.parent = new_id[static_cast<std::size_t>(n.parent)];
    for (auto& body : n.bodies)
      for (int& c : body) c = new_id[static_cast<std::size_t>(c)];
    for (int& w : n.waits) w = new_id[static_cast<std::size_t>(w)];
    k[static_cast<std::size_t>(n.id)] = std::move(kernels[old]);
    im[static_cast<std::size_t>(n.id)] = impls[old];
    snaps[static_cast<std::size_t>(n.id)] = std::move(snapshots[old]);
    renumbered[static_cast<std::size_t>(n.id)] = std::move(n);
  }
  for (int& id : top) id = new_id[static_cast<std::size_t>(id)];
  for (auto& list : nodes_of_buffer)
    for (int& id : list) id = new_id[static_cast<std::size_t>(id)];
  nodes = std::move(renumbered);
  snapshots = std::move(snaps);
  kernels = std::move(k);
  impls = std::move(im);
}

void Recording::State::finish() {
  check_open("RecordingBuilder::finish");
  if (!open.empty()) throw RecordError("Recording: a device construct was left open");
  flush_deferred();
  for (int id : result_values) results.push_back(arg_info("result", Access::read, id));
  for (auto& [id, raise] : check_values)
    checks.push_back({arg_info("check", Access::read, id), std::move(raise)});
  check_values.clear();
  shadow_written_params();
  renumber();
  infer_edges(top);
  if (options.record) make_names();
  finished = true;
}

}  // namespace eagle
