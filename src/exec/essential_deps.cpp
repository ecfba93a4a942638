// The dependencies of a list's nodes without those another of them implies (a transitive
// reduction): the CUDA executor gives each node only these, so a node waits on the one stream
// whose work it follows instead of on every producer upstream of it too. And the root the
// others follow under BuildOptions::defer_side_roots.
#include <cstdint>
#include <unordered_map>

#include "exec/executor.hpp"

namespace eagle::detail {

std::vector<std::vector<int>> essential_deps(const std::vector<PlannedNode>& nodes,
                                             const std::vector<int>& list) {
  std::unordered_map<int, std::size_t> position;
  for (std::size_t k = 0; k < list.size(); ++k) position[list[k]] = k;
  const std::size_t words = (list.size() + 63) / 64;
  // reach[k]: the list positions node k depends on, directly or through others (a bit each).
  std::vector<std::vector<uint64_t>> reach(list.size(), std::vector<uint64_t>(words, 0));
  auto has = [&](std::size_t k, std::size_t j) { return (reach[k][j / 64] >> (j % 64)) & 1; };
  std::vector<std::vector<int>> out(list.size());
  for (std::size_t k = 0; k < list.size(); ++k) {
    const std::vector<int>& deps = nodes[static_cast<std::size_t>(list[k])].deps;
    for (int d : deps) {
      const auto p = position.find(d);
      if (p == position.end() || p->second >= k) continue;  // not an earlier node of the list
      reach[k][p->second / 64] |= uint64_t{1} << (p->second % 64);
      for (std::size_t w = 0; w < words; ++w) reach[k][w] |= reach[p->second][w];
    }
    for (int d : deps) {
      const auto p = position.find(d);
      bool implied = false;
      if (p != position.end() && p->second < k)
        for (int e : deps) {
          const auto q = position.find(e);
          if (q != position.end() && q->second < k && q->second != p->second &&
              has(q->second, p->second)) {
            implied = true;
            break;
          }
        }
      if (!implied) out[k].push_back(d);
    }
  }
  return out;
}

int heaviest_root(const std::vector<PlannedNode>& nodes, const std::vector<int>& list) {
  int heaviest = -1, roots = 0;
  for (int i : list) {
    const PlannedNode& n = nodes[static_cast<std::size_t>(i)];
    if (!n.deps.empty() || !n.waits.empty()) continue;
    ++roots;
    if (heaviest < 0 || n.traffic_bytes > nodes[static_cast<std::size_t>(heaviest)].traffic_bytes)
      heaviest = i;
  }
  return roots > 1 ? heaviest : -1;
}

}  // namespace eagle::detail
