// place_shared_work: records of a kernel name that several recorded nodes' child graphs run are
// placed by their order within a launch, and only where that order is certain.
// flattened_orders / place_flattened: records placed by the ids CUDA gives flattened child
// nodes, under the candidate orders no record contradicts.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "exec/trace_placement.hpp"

namespace eagle::detail {
namespace {

DeviceRecord record(const std::string& kernel, uint32_t launch, uint64_t begin, int node = -1) {
  DeviceRecord r;
  r.node = node;
  r.kernel = r.work = kernel;  // matched by name alone here, as a copy is
  r.correlation = launch;
  r.begin_ns = begin;
  r.end_ns = begin + 5;
  return r;
}

std::vector<int> nodes_of(const std::vector<DeviceRecord>& records) {
  std::vector<int> out;
  for (const DeviceRecord& r : records) out.push_back(r.node);
  return out;
}

// Nodes 3 then 7 (7 waits for 3), 7 running the kernel twice per launch.
const SharedWork kShared = {{"gemm", {{3, 1}, {7, 2}}}};
const auto kOnce = [](int) { return true; };
const auto kChain = [](int a, int b) { return a == 3 && b == 7; };

TEST(TracePlacement, SharedNamesGoToTheNodesInOrderWithinEachLaunch) {
  // Two launches, their records out of time order and interleaved with others'.
  std::vector<DeviceRecord> records = {
      record("gemm", 1, 30),  record("gemm", 1, 10),   record("other", 1, 12),
      record("gemm", 1, 20),  record("gemm", 2, 120),  record("gemm", 2, 110),
      record("gemm", 2, 100), record("gemm", 1, 5, 9),  // placed already: node 9 keeps it
  };
  place_shared_work(records, kShared, kOnce, kChain);
  EXPECT_EQ(nodes_of(records), (std::vector<int>{7, 3, -1, 7, 7, 7, 3, 9}));
}

TEST(TracePlacement, ALaunchWithAnotherCountStaysOnNoNode) {
  // Two of the three records a launch should have (an arm skipped, a record lost): any
  // placement could be wrong, so none is made; the whole launch beside it is placed.
  std::vector<DeviceRecord> records = {record("gemm", 1, 10), record("gemm", 1, 20),
                                       record("gemm", 2, 10), record("gemm", 2, 20),
                                       record("gemm", 2, 30)};
  place_shared_work(records, kShared, kOnce, kChain);
  EXPECT_EQ(nodes_of(records), (std::vector<int>{-1, -1, 3, 7, 7}));
}

TEST(TracePlacement, NodesThatMayOverlapOrRepeatAreNotOrdered) {
  const std::vector<DeviceRecord> launch = {record("gemm", 1, 10), record("gemm", 1, 20),
                                            record("gemm", 1, 30)};
  // 7 does not wait for 3 (two branches, or independent work): their records may interleave.
  std::vector<DeviceRecord> records = launch;
  place_shared_work(records, kShared, kOnce, [](int, int) { return false; });
  EXPECT_EQ(nodes_of(records), (std::vector<int>{-1, -1, -1}));
  // 7 sits in a loop body or an arm: it may run any number of times.
  records = launch;
  place_shared_work(
      records, kShared, [](int n) { return n != 7; }, kChain);
  EXPECT_EQ(nodes_of(records), (std::vector<int>{-1, -1, -1}));
  // The order must hold between neighbours in node order, not just somewhere.
  records = launch;
  place_shared_work(records, kShared, kOnce, [](int a, int b) { return a == 7 && b == 3; });
  EXPECT_EQ(nodes_of(records), (std::vector<int>{-1, -1, -1}));
}

TEST(TracePlacement, TheWorkKeyTellsLaunchShapesApart) {
  LaunchShape a, b;
  a.grid[0] = b.grid[0] = 132;
  a.block[0] = b.block[0] = 256;
  EXPECT_EQ(work_key("gemm", &a), work_key("gemm", &b));
  b.shared = 1024;
  EXPECT_NE(work_key("gemm", &a), work_key("gemm", &b));
  b = a;
  b.grid[1] = 2;
  EXPECT_NE(work_key("gemm", &a), work_key("gemm", &b));
  EXPECT_NE(work_key("gemm", &a), work_key("gemv", &a));
  EXPECT_EQ(work_key("memcpy", nullptr), "memcpy");
}

TEST(TracePlacement, ANameOfOneNodeOrNoneIsLeftAlone) {
  std::vector<DeviceRecord> records = {record("gemm", 1, 10), record("copy", 1, 20)};
  place_shared_work(records, {{"gemm", {{3, 1}}}, {"copy", {}}}, kOnce, kChain);
  EXPECT_EQ(nodes_of(records), (std::vector<int>{-1, -1}));
}

// The record of flattened node `index` of executable graph 7, running `kernel`.
DeviceRecord flat_record(uint64_t index, const std::string& kernel) {
  DeviceRecord r = record(kernel, 1, index);
  r.node_id = (uint64_t{7} << 32) | index;
  return r;
}

ChildNode kernel_node(const std::string& kernel) {
  return {kernel, std::nullopt, false, {}};
}

ChildNode nesting(std::vector<ChildNode> inner) {
  return {"", std::nullopt, true, std::move(inner)};
}

TEST(TracePlacement, FlatChildGraphsHaveOneOrderAfterTheTopLevelNodes) {
  // Top-level nodes 0..3: 1 and 3 hold child graphs (recorded nodes 11 and 13), both running
  // "gemm"; their flattened nodes take ids 4, 5, 6 in that order.
  const std::vector<ChildNode> a = {kernel_node("gemm"), kernel_node("reduce")};
  const std::vector<ChildNode> b = {kernel_node("gemm")};
  std::vector<FlattenedOrder> orders =
      flattened_orders(7, {{10, nullptr}, {11, &a}, {12, nullptr}, {13, &b}});
  ASSERT_EQ(orders.size(), 1u);
  std::vector<DeviceRecord> records = {flat_record(6, "gemm"), flat_record(4, "gemm"),
                                       flat_record(5, "reduce"), flat_record(2, "top")};
  place_flattened(records, orders);
  EXPECT_EQ(nodes_of(records), (std::vector<int>{13, 11, 11, -1}));  // id 2: top-level, not ours
  EXPECT_TRUE(orders[0].alive);
  EXPECT_TRUE(records[0].work.empty());
}

// A child graph as the cuDNN engine makes it: a kernel, then cuDNN's graph two levels down.
const std::vector<ChildNode> kNested = {
    kernel_node("prep"),
    nesting({nesting({kernel_node("memset"), kernel_node("setup"), kernel_node("fprop")})}),
    kernel_node("zero")};

TEST(TracePlacement, NestedChildGraphsKeepTheOrdersNoRecordContradicts) {
  // One top-level node (recorded node 5). Four candidates; the records below are the order the
  // H100 showed: the graph's own nodes first, each nesting node taking an id, then the nested.
  std::vector<FlattenedOrder> orders = flattened_orders(7, {{5, &kNested}});
  ASSERT_EQ(orders.size(), 4u);
  std::vector<DeviceRecord> records = {flat_record(1, "prep"), flat_record(3, "zero"),
                                       flat_record(5, "memset"), flat_record(6, "setup"),
                                       flat_record(7, "fprop")};
  std::vector<std::size_t> dropped;
  place_flattened(records, orders, [&](std::size_t i, const DeviceRecord&, const std::string&) {
    dropped.push_back(i);
  });
  EXPECT_EQ(dropped, (std::vector<std::size_t>{0, 1, 2}));
  EXPECT_EQ(std::count_if(orders.begin(), orders.end(), [](const auto& o) { return o.alive; }), 1);
  EXPECT_EQ(nodes_of(records), (std::vector<int>{5, 5, 5, 5, 5}));
}

TEST(TracePlacement, OrdersThatDisagreeOrAreAllContradictedPlaceNothing) {
  // Two child graphs: node 1's nested, node 2's one "fprop". Id 7 runs "fprop" under three
  // candidates (node 2's in two of them, node 1's nested one in the third): they disagree, so
  // the record stays on no node; the fourth expects "setup" there and is dropped.
  const std::vector<ChildNode> flat = {kernel_node("fprop")};
  std::vector<FlattenedOrder> orders = flattened_orders(7, {{1, &kNested}, {2, &flat}});
  ASSERT_EQ(orders.size(), 4u);
  std::vector<DeviceRecord> records = {flat_record(7, "fprop")};
  place_flattened(records, orders);
  EXPECT_EQ(std::count_if(orders.begin(), orders.end(), [](const auto& o) { return o.alive; }), 3);
  EXPECT_EQ(nodes_of(records), (std::vector<int>{-1}));
  // A kernel no candidate expects where it ran drops them all: nothing is placed.
  records = {flat_record(2, "fprop"), flat_record(3, "prep")};
  place_flattened(records, orders);
  EXPECT_TRUE(std::none_of(orders.begin(), orders.end(), [](const auto& o) { return o.alive; }));
  EXPECT_EQ(nodes_of(records), (std::vector<int>{-1, -1}));
}

}  // namespace
}  // namespace eagle::detail
