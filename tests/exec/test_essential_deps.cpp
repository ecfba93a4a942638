// essential_deps: a node's dependencies less those another of them implies, which the CUDA
// executor gives the graph (fewer waits across its streams); the order they keep is theirs.
#include <gtest/gtest.h>

#include "exec/executor.hpp"

namespace eagle {
namespace {

using detail::PlannedNode;

TEST(EssentialDeps, ADependencyAnotherImpliesIsDropped) {
  // 0 -> 1 -> 2 -> 3 with 3 also on 0 and 1 (as a backward node reading a forward value and the
  // cotangent computed from it), 4 on 0 and 2 (2 implies 0), 5 on nothing.
  std::vector<PlannedNode> nodes(6);
  nodes[1].deps = {0};
  nodes[2].deps = {1};
  nodes[3].deps = {0, 1, 2};
  nodes[4].deps = {0, 2};
  const std::vector<std::vector<int>> e = detail::essential_deps(nodes, {0, 1, 2, 3, 4, 5});
  EXPECT_EQ(e, (std::vector<std::vector<int>>{{}, {0}, {1}, {2}, {2}, {}}));
}

TEST(EssentialDeps, IndependentDependenciesAllStay) {
  // A diamond: 3 joins 1 and 2, which both follow 0; 3's edge to 0 is implied twice over.
  std::vector<PlannedNode> nodes(4);
  nodes[1].deps = {0};
  nodes[2].deps = {0};
  nodes[3].deps = {0, 1, 2};
  EXPECT_EQ(detail::essential_deps(nodes, {0, 1, 2, 3}),
            (std::vector<std::vector<int>>{{}, {0}, {0}, {1, 2}}));
}

TEST(EssentialDeps, ListsAreNodeIndicesAndOutsidersStay) {
  // A body's list [7, 9, 11] over the plan's node indices; node 11 also names node 2 (not in the
  // list: kept as it is) and 7, which 9 implies.
  std::vector<PlannedNode> nodes(12);
  nodes[9].deps = {7};
  nodes[11].deps = {2, 7, 9};
  EXPECT_EQ(detail::essential_deps(nodes, {7, 9, 11}),
            (std::vector<std::vector<int>>{{}, {7}, {2, 9}}));
  // Across more than 64 nodes: a chain, each node also on the first.
  const int n = 150;
  std::vector<PlannedNode> chain(n);
  std::vector<int> list;
  for (int i = 0; i < n; ++i) {
    list.push_back(i);
    if (i > 1) chain[i].deps = {0, i - 1};
    if (i == 1) chain[i].deps = {0};
  }
  const std::vector<std::vector<int>> e = detail::essential_deps(chain, list);
  for (int i = 1; i < n; ++i) EXPECT_EQ(e[i], std::vector<int>{i - 1}) << i;
}

TEST(HeaviestRoot, TheRootOthersFollowIsTheOneWithTheMostBytes) {
  // Roots 0 (a fill), 1 (a count), 2 (the first GEMM); 3 follows 2.
  std::vector<PlannedNode> nodes(4);
  nodes[0].traffic_bytes = 4;
  nodes[1].traffic_bytes = 32768;
  nodes[2].traffic_bytes = 8 << 20;
  nodes[3].traffic_bytes = 1 << 30;  // heavier, but not a root
  nodes[3].deps = {2};
  EXPECT_EQ(detail::heaviest_root(nodes, {0, 1, 2, 3}), 2);
  // Equals: the first; a fork branch's wait makes a node no root; one root: none to follow it.
  nodes[0].traffic_bytes = 8 << 20;
  EXPECT_EQ(detail::heaviest_root(nodes, {0, 1, 2, 3}), 0);
  nodes[0].waits = {3};
  EXPECT_EQ(detail::heaviest_root(nodes, {0, 1, 2, 3}), 2);
  EXPECT_EQ(detail::heaviest_root(nodes, {2, 3}), -1);
}

}  // namespace
}  // namespace eagle
