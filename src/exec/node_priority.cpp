// Which nodes of a list later nodes wait on: the CUDA executor joins a WHILE body or a fork
// branch after the others (its sinks), and its node priorities (BuildOptions::prioritize_chains)
// start them before the top-level list's sinks.
#include "exec/executor.hpp"

namespace eagle::detail {

std::vector<char> waited_on(const std::vector<PlannedNode>& nodes, const std::vector<int>& list) {
  std::vector<char> out(nodes.size(), 0);
  for (int i : list) {
    const PlannedNode& n = nodes[static_cast<std::size_t>(i)];
    for (int d : n.deps) out[static_cast<std::size_t>(d)] = 1;
    for (int w : n.waits) out[static_cast<std::size_t>(w)] = 1;
  }
  return out;
}

}  // namespace eagle::detail
