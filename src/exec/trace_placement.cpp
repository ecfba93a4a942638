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

}  // namespace

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
