// place_shared_work: records of a kernel name that several recorded nodes' child graphs run are
// placed by their order within a launch, and only where that order is certain.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace eagle::detail
