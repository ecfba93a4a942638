// Internal: GPU traces through CUPTI's activity API (exec/cupti_library.hpp opens CUPTI).
//
// CUPTI reports each kernel, memcpy and memset a graph launch runs with the id of the graph node
// that ran it, and that node is the instantiated copy of the node eagle added: instantiation
// clones every node, nodes inside child graphs too. While a tracer lives, CUPTI's resource
// callback tells eagle each clone's original, so a record maps back to the CUDA graph node eagle
// made for a recorded node (map_node). An executable graph instantiated while no session was
// open (or in an earlier one: a session's clone map ends with it) has no such map: the CUDA
// executor instantiates again when tracing starts.
//
// CUPTI's activity kinds and callbacks are process-wide: the first tracer turns them on, the last
// one off (a count over every traced graph of the process).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "exec/trace_placement.hpp"

namespace eagle::detail {

class CuptiTracer {
 public:
  // Joins the process's CUPTI session, starting it when none runs. Throws NotSupported with
  // cupti_status()'s reason when CUPTI is absent, or CUPTI's own error when it refuses.
  CuptiTracer();
  ~CuptiTracer();
  CuptiTracer(const CuptiTracer&) = delete;
  CuptiTracer& operator=(const CuptiTracer&) = delete;

  // The session now open (numbered from 1 in the process), or 0 when none is: a graph
  // instantiated while session k is open has its clones mapped for as long as k stays open.
  static uint64_t session();

  // Records of this CUDA graph node (a cudaGraphNode_t) belong to recorded node `node`.
  void map_node(void* cuda_node, int node);
  // Records of this graph (a cudaGraph_t: the built graph, a child or a conditional body), or of
  // a clone of it, that no mapped node claims belong to this tracer, with `node` (-1: none; a
  // child graph's: the recorded node that holds it).
  void map_graph(void* cuda_graph, int node = -1);
  // Records of this executable graph (a cudaGraphExec_t) belong to this tracer. Instantiation
  // flattens child graphs into it, and their nodes' copies come with no clone callback: such a
  // record is known only by its graph.
  void map_exec(void* cuda_exec);
  // The work keys (names and shapes) that several recorded nodes' child graphs run, where the
  // name alone does not tell the node either (place_shared_work places them).
  SharedWork shared_child_work() const;

  // The nodes of the child graph that CUDA graph node `cuda_node` (of recorded node `node`)
  // holds, in the order cudaGraphGetNodes gives them (kernel names mangled or plain), nested
  // child graphs included. A record of this tracer that no mapped node claims belongs to `node`
  // when `node` is the only one whose child graphs run work of its kernel's name, else of that
  // name and launch shape (sole_child_node); else by its flattened node's id
  // (predict_flattened).
  void map_child_nodes(void* cuda_node, int node, const std::vector<ChildNode>& inner);
  // After map_child_nodes for every child graph node of executable graph `cuda_exec`: which node
  // ids its flattened child nodes take. CUPTI numbers an executable graph's nodes in the order
  // it makes them: its top-level nodes (each reported by the clone callback), then the nodes of
  // each child graph in turn, with no callback (flattened_orders); take() places records by the
  // candidate orders no record contradicts (place_flattened).
  void predict_flattened(void* cuda_exec);

  // Flushes CUPTI's buffers and returns the records placed on this tracer since the last call.
  // Call after the launches finished (a record arrives once its work has run).
  std::vector<DeviceRecord> take();

 private:
  // The one recorded node whose child graphs run the record's kernel (by name, else by name and
  // `shape`, null for a copy or memset), or -1; a record the name alone does not place gets its
  // work key. Under the session's mutex.
  int sole_child_node(DeviceRecord& r, const LaunchShape* shape) const;

  std::vector<DeviceRecord> pending_;  // guarded by the session's mutex
  // Demangled kernel name -> the recorded nodes whose child graphs run it, each with how many
  // nodes of that name they hold; guarded by the session's mutex.
  std::unordered_map<std::string, std::map<int, int>> child_work_;
  // The same by work key (the name and the launch shape).
  std::unordered_map<std::string, std::map<int, int>> child_shapes_;
  // CUPTI's id of a CUDA graph node holding a child graph -> its recorded node and the child's
  // nodes, kernel names demangled (map_child_nodes).
  struct ChildNodes {
    int node = -1;
    std::vector<ChildNode> inner;
  };
  std::unordered_map<uint64_t, ChildNodes> child_nodes_;
  // The candidate orders of the traced executable graph's flattened child nodes
  // (predict_flattened); take() places records by them.
  std::vector<FlattenedOrder> candidates_;
  friend struct CuptiSession;
};

}  // namespace eagle::detail
