// Internal: where a GPU trace's device records land when CUPTI alone cannot say. Instantiation
// flattens child graphs without telling CUPTI where their nodes came from, so a record of work
// inside a planned op's child graph is known by its graph, the id its flattened node took and its
// kernel's name. Tried in turn: a name (then a name and launch shape) that one recorded node's
// child graphs run (CuptiTracer); the id, by the candidate orders of the flattened nodes that no
// record contradicts (flattened_orders, place_flattened); a name that several share, by order
// within the launch where that order is certain (place_shared_work).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace eagle::detail {

// One activity record placed on a tracer.
struct DeviceRecord {
  int node = -1;       // the recorded node, or -1: of a mapped graph, on no mapped node
  std::string kernel;  // the CUDA kernel's name, "memcpy" or "memset"
  // work_key(kernel, shape) where the name alone tells no node (else empty): what
  // place_shared_work matches
  std::string work;
  uint64_t node_id = 0;      // CUPTI's graph node id (of the executable graph's node that ran it)
  uint32_t correlation = 0;  // CUPTI's correlation id: that of the cudaGraphLaunch that ran it
  uint32_t stream = 0;       // CUPTI's stream id
  uint64_t begin_ns = 0, end_ns = 0;  // CUPTI's clock (cuptiGetTimestamp)
};

// A kernel launch's shape: grid and block dimensions and dynamic shared memory bytes.
struct LaunchShape {
  int64_t grid[3] = {0, 0, 0}, block[3] = {0, 0, 0}, shared = 0;
};
// The key a child graph's node and a device record are matched by: the kernel's name and its
// launch shape (two nodes running one kernel at different sizes are told apart), or the name
// alone for a copy or memset.
std::string work_key(const std::string& kernel, const LaunchShape* shape);

// Per work key that two or more recorded nodes' child graphs run: those nodes in ascending
// order, each with how many nodes of that key its child graphs hold.
using SharedWork = std::unordered_map<std::string, std::vector<std::pair<int, int>>>;

// Places the records on no node (node -1) of a shared key: in each launch (correlation id) the
// records of that key, by start time, go to the nodes in order, each taking its count. Only
// where that cannot go wrong: every node of the name runs once per launch (`once`), each runs
// after the one before it finished (`after(a, b)`: b depends on a through a chain of
// dependencies), and the launch has exactly as many such records as the nodes hold. Otherwise
// the records stay on no node.
void place_shared_work(std::vector<DeviceRecord>& records, const SharedWork& shared,
                       const std::function<bool(int)>& once,
                       const std::function<bool(int, int)>& after);

// A node inside a child graph: the kernel it runs ("memcpy", "memset"; "" for a node that runs
// no work) with its launch shape (none for a copy or memset), or, for a node that holds a child
// graph itself, that graph's nodes in the order cudaGraphGetNodes gives them.
struct ChildNode {
  std::string kernel;
  std::optional<LaunchShape> shape;
  bool holds_graph = false;
  std::vector<ChildNode> inner;
};

// One candidate order of an executable graph's flattened child nodes: CUPTI's node id -> the
// recorded node and the kernel expected there. Dropped (alive = false) once a record
// contradicts it.
struct FlattenedOrder {
  std::unordered_map<uint64_t, std::pair<int, std::string>> at;
  bool alive = true;
};

// The candidate orders of executable graph `exec`'s flattened child nodes. CUPTI numbers an
// executable graph's nodes (exec << 32 | index) in the order CUDA makes them: its top-level
// nodes first, then the nodes of each top-level node's child graph in turn. `tops`: the
// top-level nodes in index order, each with its recorded node and its child graph's nodes
// (null: it holds none). Where child graphs nest, the order is not documented. The candidates
// put a nested graph's nodes where its nesting node is or after the rest of its graph, with
// the nesting node taking an id or not. Equal candidates are merged (without nesting there is
// one).
std::vector<FlattenedOrder> flattened_orders(
    uint32_t exec, const std::vector<std::pair<int, const std::vector<ChildNode>*>>& tops);

// Drops each live order that a record contradicts (another kernel at one of its ids), telling
// `dropped` (order index, record, kernel expected), then places each record on no node that the
// live orders all place, on the same node.
void place_flattened(
    std::vector<DeviceRecord>& records, std::vector<FlattenedOrder>& orders,
    const std::function<void(std::size_t, const DeviceRecord&, const std::string&)>& dropped = {});

}  // namespace eagle::detail
