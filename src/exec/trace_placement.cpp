#include "exec/trace_placement.hpp"

#include <algorithm>
#include <map>

namespace eagle::detail {

namespace {

// Whether the records of these nodes come in the nodes' order within a launch.
bool ordered(const std::vector<std::pair<int, int>>& nodes, const std::function<bool(int)>& once,
             const std::function<bool(int, int)>& after) {
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].second < 1 || !once(nodes[i].first)) return false;
    if (i > 0 && !after(nodes[i - 1].first, nodes[i].first)) return false;
  }
  return true;
}

// The flattened order of one child graph's nodes under one candidate rule (flattened_orders):
// each entry the node's kernel ("" for one that runs none, or for a nesting node's own id).
void flatten(const std::vector<ChildNode>& nodes, bool nested_in_place, bool nesting_takes_id,
             std::vector<std::string>& out) {
  for (const ChildNode& n : nodes) {
    if (!n.holds_graph) {
      out.push_back(n.kernel);
      continue;
    }
    if (nesting_takes_id) out.emplace_back();
    if (nested_in_place) flatten(n.inner, nested_in_place, nesting_takes_id, out);
  }
  if (!nested_in_place)
    for (const ChildNode& n : nodes)
      if (n.holds_graph) flatten(n.inner, nested_in_place, nesting_takes_id, out);
}

}  // namespace

std::vector<FlattenedOrder> flattened_orders(
    uint32_t exec, const std::vector<std::pair<int, const std::vector<ChildNode>*>>& tops) {
  std::vector<FlattenedOrder> orders;
  for (const bool nested_in_place : {true, false})
    for (const bool nesting_takes_id : {false, true}) {
      FlattenedOrder o;
      uint64_t next = tops.size();
      for (const auto& [node, inner] : tops) {
        if (!inner) continue;
        std::vector<std::string> kernels;
        flatten(*inner, nested_in_place, nesting_takes_id, kernels);
        for (std::string& kernel : kernels)
          o.at[(uint64_t{exec} << 32) | next++] = {node, std::move(kernel)};
      }
      if (std::none_of(orders.begin(), orders.end(),
                       [&](const FlattenedOrder& d) { return d.at == o.at; }))
        orders.push_back(std::move(o));
    }
  return orders;
}

void place_flattened(
    std::vector<DeviceRecord>& records, std::vector<FlattenedOrder>& orders,
    const std::function<void(std::size_t, const DeviceRecord&, const std::string&)>& dropped) {
  for (std::size_t i = 0; i < orders.size(); ++i) {
    FlattenedOrder& o = orders[i];
    for (const DeviceRecord& r : records) {
      const auto it = o.at.find(r.node_id);
      if (!o.alive || it == o.at.end() || it->second.second == r.kernel) continue;
      o.alive = false;
      if (dropped) dropped(i, r, it->second.second);
    }
  }
  for (DeviceRecord& r : records) {
    if (r.node >= 0) continue;
    int node = -1;
    bool agreed = false;
    for (const FlattenedOrder& o : orders) {
      if (!o.alive) continue;
      const auto it = o.at.find(r.node_id);
      agreed = it != o.at.end() && (node < 0 || node == it->second.first);
      if (!agreed) break;
      node = it->second.first;
    }
    if (agreed) {
      r.node = node;
      r.work.clear();
    }
  }
}

std::string work_key(const std::string& kernel, const LaunchShape* shape) {
  if (!shape) return kernel;
  std::string key = kernel + " <<<";
  for (int64_t g : shape->grid) key += std::to_string(g) + ",";
  key += " ";
  for (int64_t b : shape->block) key += std::to_string(b) + ",";
  return key + " " + std::to_string(shape->shared) + ">>>";
}

void place_shared_work(std::vector<DeviceRecord>& records, const SharedWork& shared,
                       const std::function<bool(int)>& once,
                       const std::function<bool(int, int)>& after) {
  for (const auto& [key, nodes] : shared) {
    if (nodes.size() < 2 || !ordered(nodes, once, after)) continue;
    std::size_t expected = 0;
    for (const auto& [node, count] : nodes) expected += static_cast<std::size_t>(count);
    std::map<uint32_t, std::vector<std::size_t>> by_launch;  // unplaced records of this name
    for (std::size_t i = 0; i < records.size(); ++i)
      if (records[i].node < 0 && records[i].work == key)
        by_launch[records[i].correlation].push_back(i);
    for (auto& [launch, at] : by_launch) {
      if (at.size() != expected) continue;  // a launch not like the graph's shape: leave it
      std::stable_sort(at.begin(), at.end(), [&](std::size_t a, std::size_t b) {
        return records[a].begin_ns < records[b].begin_ns;
      });
      std::size_t next = 0;
      for (const auto& [node, count] : nodes)
        for (int k = 0; k < count; ++k) records[at[next++]].node = node;
    }
  }
}

}  // namespace eagle::detail
