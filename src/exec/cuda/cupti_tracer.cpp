#include "exec/cuda/cupti_tracer.hpp"

#ifdef EAGLE_HAVE_CUDA

#include <cupti.h>
#include <cxxabi.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "eagle/core/error.hpp"
#include "exec/cupti_library.hpp"

namespace eagle::detail {

namespace {

// CUPTI's entry points with the types cupti.h declares (decltype names no symbol: nothing links).
struct Api {
  decltype(&cuptiGetResultString) result_string = nullptr;
  decltype(&cuptiActivityEnable) enable = nullptr;
  decltype(&cuptiActivityDisable) disable = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) register_callbacks = nullptr;
  decltype(&cuptiActivityFlushAll) flush_all = nullptr;
  decltype(&cuptiActivityGetNextRecord) next_record = nullptr;
  decltype(&cuptiGetGraphNodeId) node_id = nullptr;
  decltype(&cuptiGetGraphId) graph_id = nullptr;
  decltype(&cuptiSubscribe) subscribe = nullptr;
  decltype(&cuptiUnsubscribe) unsubscribe = nullptr;
  decltype(&cuptiEnableCallback) enable_callback = nullptr;
  decltype(&cuptiGetGraphExecId) graph_exec_id = nullptr;  // null when CUPTI lacks it
};

template <class Fn>
void cast(void* address, Fn& fn) {
  fn = reinterpret_cast<Fn>(address);
}

Api typed(const CuptiEntryPoints& p) {
  Api a;
  cast(p.get_result_string, a.result_string);
  cast(p.activity_enable, a.enable);
  cast(p.activity_disable, a.disable);
  cast(p.register_callbacks, a.register_callbacks);
  cast(p.flush_all, a.flush_all);
  cast(p.next_record, a.next_record);
  cast(p.graph_node_id, a.node_id);
  cast(p.graph_id, a.graph_id);
  cast(p.subscribe, a.subscribe);
  cast(p.unsubscribe, a.unsubscribe);
  cast(p.enable_callback, a.enable_callback);
  cast(p.graph_exec_id, a.graph_exec_id);
  return a;
}

// What a graph launch runs that CUPTI reports with its graph node: kernels, memcpy and memset
// nodes (a param's copy is a memcpy node).
constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                                         CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET};
constexpr std::size_t kBufferBytes = std::size_t{8} << 20;
// A clone of a clone (a child graph's node, cloned into its parent and again on instantiation)
// is followed this far back to a node eagle mapped.
constexpr int kMaxCloneDepth = 8;

std::string demangle(const char* name) {
  int status = 0;
  char* plain = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = status == 0 && plain ? plain : name;
  std::free(plain);
  return out;
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records);
void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid);
void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId id,
                          const void* data);

// The fields every activity record eagle reads has (kernel, memcpy and memset records alike).
template <class Record>
void read_common(const Record& a, DeviceRecord& r, uint64_t& node_id, uint32_t& graph) {
  r.correlation = a.correlationId;
  r.stream = a.streamId;
  r.begin_ns = a.start;
  r.end_ns = a.end;
  node_id = a.graphNodeId;
  graph = a.graphId;
}

}  // namespace

// The process's one CUPTI session: its switches, the clone map and where records go. Never
// destroyed (CUPTI may deliver a buffer while the process exits).
struct CuptiSession {
  static CuptiSession& get() {
    static auto& session = *new CuptiSession();
    return session;
  }

  std::string error(CUptiResult r, const char* what) const {
    const char* text = nullptr;
    if (!api.result_string || api.result_string(r, &text) != CUPTI_SUCCESS || !text)
      text = "unknown error";
    return std::string("CUPTI's ") + what + " failed: " + text + " (CUptiResult " +
           std::to_string(static_cast<int>(r)) + ")";
  }

  void join() {
    std::lock_guard<std::mutex> lock(lifecycle);
    if (users == 0) start();
    ++users;
  }

  void leave() {
    std::lock_guard<std::mutex> lock(lifecycle);
    if (--users > 0) return;
    open = 0;
    // Errors are ignored: nothing is left to report them to, and the next join starts afresh.
    api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    for (CUpti_ActivityKind kind : kKinds) api.disable(kind);
    api.unsubscribe(subscriber);
    subscriber = nullptr;
    std::lock_guard<std::mutex> maps(state);
    original_of.clear();
    original_graph_of.clear();
    seed_of_graph.clear();
    clones_into.clear();
  }

  // Places every record of one buffer on the tracer that mapped its node (or graph).
  void place(uint8_t* buffer, std::size_t valid) {
    std::lock_guard<std::mutex> lock(state);
    CUpti_Activity* record = nullptr;
    while (api.next_record(buffer, valid, &record) == CUPTI_SUCCESS) {
      DeviceRecord r;
      uint64_t node_id = 0;
      uint32_t graph = 0;
      LaunchShape shape;
      const LaunchShape* launched = nullptr;  // a kernel's; none for a copy or memset
      switch (record->kind) {
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
        case CUPTI_ACTIVITY_KIND_KERNEL: {
          const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
          r.kernel = kernel_name(k->name);
          shape.grid[0] = k->gridX, shape.grid[1] = k->gridY, shape.grid[2] = k->gridZ;
          shape.block[0] = k->blockX, shape.block[1] = k->blockY, shape.block[2] = k->blockZ;
          shape.shared = k->dynamicSharedMemory;
          launched = &shape;
          read_common(*k, r, node_id, graph);
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
          r.kernel = "memcpy";
          read_common(*reinterpret_cast<const CUpti_ActivityMemcpy6*>(record), r, node_id, graph);
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
          r.kernel = "memset";
          read_common(*reinterpret_cast<const CUpti_ActivityMemset4*>(record), r, node_id, graph);
          break;
        }
        default:
          continue;
      }
      if (node_id == 0 && graph == 0) continue;  // not run by a graph launch
      r.node_id = node_id;
      const auto [tracer, node] = owner(node_id, graph);
      if (debug && (!tracer || node < 0))
        std::fprintf(stderr, "eagle trace: record of node id %llu, graph id %u (%s) %s\n",
                     static_cast<unsigned long long>(node_id), graph, r.kernel.c_str(),
                     tracer ? "claimed by its graph only" : "unclaimed");
      if (!tracer) continue;  // another graph's, or one nobody traces
      r.node = node;
      // Flattened out of a child graph: its kernel's name (and shape) may tell the node.
      if (node < 0) r.node = tracer->sole_child_node(r, launched);
      tracer->pending_.push_back(std::move(r));
    }
  }

  // The tracer and recorded node of a record (node -1: only its graph is known); under `state`.
  // A node, else its graph, is followed back through clones to one that was mapped (a child
  // graph's own nodes are cloned with it when the parent is instantiated).
  std::pair<CuptiTracer*, int> owner(uint64_t node_id, uint32_t graph) const {
    for (int depth = 0; node_id != 0 && depth <= kMaxCloneDepth; ++depth) {
      if (auto it = node_owner.find(node_id); it != node_owner.end()) return it->second;
      auto up = original_of.find(node_id);
      if (up == original_of.end()) break;
      node_id = up->second;
    }
    for (int depth = 0; graph != 0 && depth <= kMaxCloneDepth; ++depth) {
      if (auto it = graph_owner.find(graph); it != graph_owner.end()) return it->second;
      // A graph made by instantiation: the tracer of a node cloned into it (graph only).
      if (auto seed = seed_of_graph.find(graph); seed != seed_of_graph.end() && seed->second != 0)
        if (const auto [tracer, node] = owner(seed->second, 0); tracer) return {tracer, -1};
      auto up = original_graph_of.find(graph);
      if (up == original_graph_of.end()) break;
      graph = up->second;
    }
    return {nullptr, -1};
  }

  // Under `state`. CUPTI shares one name string between the records of one kernel.
  const std::string& kernel_name(const char* name) {
    if (!name) name = "kernel";
    auto [it, added] = names.try_emplace(name);
    if (added) it->second = demangle(name);
    return it->second;
  }

  void unmap(const CuptiTracer* tracer) {
    std::lock_guard<std::mutex> lock(state);
    std::erase_if(node_owner, [&](const auto& e) { return e.second.first == tracer; });
    std::erase_if(graph_owner, [&](const auto& e) { return e.second.first == tracer; });
  }

  std::mutex lifecycle;  // join and leave: CUPTI's switches
  int users = 0;
  Api api;
  bool buffers_registered = false;
  CUpti_SubscriberHandle subscriber = nullptr;
  uint64_t sessions = 0;          // started so far
  std::atomic<uint64_t> open{0};  // the one open now, or 0

  std::mutex state;  // everything below, and every tracer's pending records
  std::unordered_map<uint64_t, uint64_t> original_of;        // a clone's node id: its original's
  std::unordered_map<uint32_t, uint32_t> original_graph_of;  // the same for graph ids
  // A graph a clone was made into: the first clone's original node id.
  std::unordered_map<uint32_t, uint64_t> seed_of_graph;
  // A graph's nodes that clone callbacks reported, by their index in it: CUPTI's node id of a
  // clone is (graph id << 32) | index (what predict_flattened builds on).
  std::unordered_map<uint32_t, std::map<uint32_t, uint64_t>> clones_into;
  std::unordered_map<uint64_t, std::pair<CuptiTracer*, int>> node_owner;
  // A child graph's nodes belong to the node that holds it; other graphs' to no node (-1).
  std::unordered_map<uint32_t, std::pair<CuptiTracer*, int>> graph_owner;
  // EAGLE_CUPTI_DEBUG: unclaimed records, clones and mappings to stderr.
  const bool debug = std::getenv("EAGLE_CUPTI_DEBUG") != nullptr;
  std::unordered_map<const char*, std::string> names;

 private:
  // Under `lifecycle`, with no user: turns CUPTI's activity kinds and the clone callback on.
  void start() {
    const CuptiLibrary& lib = cupti_library();
    if (!lib.loaded)
      throw NotSupported("Graph::set_tracing: tracing a CUDA graph needs CUPTI's activity API; " +
                         lib.status);
    // CUPTI cannot be swapped within a process: the first library opened stays.
    if (!api.enable) api = typed(lib.api);
    if (!buffers_registered) {
      const CUptiResult r = api.register_callbacks(buffer_requested, buffer_completed);
      if (r != CUPTI_SUCCESS)
        throw NotSupported("Graph::set_tracing: " + error(r, "cuptiActivityRegisterCallbacks"));
      buffers_registered = true;
    }
    CUpti_SubscriberHandle handle = nullptr;
    CUptiResult r = api.subscribe(&handle, on_callback, nullptr);
    if (r != CUPTI_SUCCESS)
      throw NotSupported("Graph::set_tracing: " + error(r, "cuptiSubscribe") +
                         " (a profiler such as Nsight Systems may hold CUPTI's callbacks)");
    r = api.enable_callback(1, handle, CUPTI_CB_DOMAIN_RESOURCE,
                            CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED);
    if (r == CUPTI_SUCCESS)
      r = api.enable_callback(1, handle, CUPTI_CB_DOMAIN_RESOURCE,
                              CUPTI_CBID_RESOURCE_GRAPH_CLONED);
    std::size_t enabled = 0;
    while (r == CUPTI_SUCCESS && enabled < std::size(kKinds)) {
      r = api.enable(kKinds[enabled]);
      if (r == CUPTI_SUCCESS) ++enabled;
    }
    if (r != CUPTI_SUCCESS) {
      for (std::size_t k = 0; k < enabled; ++k) api.disable(kKinds[k]);
      api.unsubscribe(handle);
      throw NotSupported("Graph::set_tracing: " +
                         error(r, enabled == 0 ? "cuptiEnableCallback or cuptiActivityEnable"
                                               : "cuptiActivityEnable"));
    }
    subscriber = handle;
    open = ++sessions;
  }
};

namespace {

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  if (buffer && valid > 0) CuptiSession::get().place(buffer, valid);
  std::free(buffer);
}

// Instantiation (and cloning) copies each node and graph: remember each copy's original.
void CUPTIAPI on_callback(void*, CUpti_CallbackDomain domain, CUpti_CallbackId id,
                          const void* data) {
  if (domain != CUPTI_CB_DOMAIN_RESOURCE) return;
  const auto* resource = static_cast<const CUpti_ResourceData*>(data);
  const auto* graph = static_cast<const CUpti_GraphData*>(resource->resourceDescriptor);
  CuptiSession& s = CuptiSession::get();
  if (id == CUPTI_CBID_RESOURCE_GRAPH_CLONED) {
    uint32_t clone = 0, original = 0;
    if (!graph || s.api.graph_id(graph->graph, &clone) != CUPTI_SUCCESS ||
        s.api.graph_id(graph->originalGraph, &original) != CUPTI_SUCCESS)
      return;
    if (s.debug) std::fprintf(stderr, "eagle trace: graph %u cloned from %u\n", clone, original);
    std::lock_guard<std::mutex> lock(s.state);
    s.original_graph_of[clone] = original;
    return;
  }
  if (id != CUPTI_CBID_RESOURCE_GRAPHNODE_CLONED) return;
  uint64_t clone = 0, original = 0;
  if (!graph || s.api.node_id(graph->node, &clone) != CUPTI_SUCCESS ||
      s.api.node_id(graph->originalNode, &original) != CUPTI_SUCCESS)
    return;
  uint32_t into = 0;
  if (graph->graph && s.api.graph_id(graph->graph, &into) != CUPTI_SUCCESS) into = 0;
  if (s.debug)
    std::fprintf(stderr, "eagle trace: node %llu (graph %u) cloned from %llu\n",
                 static_cast<unsigned long long>(clone), into,
                 static_cast<unsigned long long>(original));
  std::lock_guard<std::mutex> lock(s.state);
  s.original_of[clone] = original;
  if (into != 0) s.seed_of_graph.try_emplace(into, original);
  if (into != 0 && clone >> 32 == into)
    s.clones_into[into][static_cast<uint32_t>(clone & 0xffffffffU)] = original;
}

}  // namespace

CuptiTracer::CuptiTracer() {
  CuptiSession::get().join();
}

CuptiTracer::~CuptiTracer() {
  CuptiSession& s = CuptiSession::get();
  s.unmap(this);
  s.leave();
}

uint64_t CuptiTracer::session() {
  return CuptiSession::get().open;
}

void CuptiTracer::map_node(void* cuda_node, int node) {
  CuptiSession& s = CuptiSession::get();
  uint64_t id = 0;
  const CUptiResult r = s.api.node_id(static_cast<CUgraphNode>(cuda_node), &id);
  if (r != CUPTI_SUCCESS) throw CudaError(s.error(r, "cuptiGetGraphNodeId"));
  if (s.debug)
    std::fprintf(stderr, "eagle trace: node %llu is recorded node %d\n",
                 static_cast<unsigned long long>(id), node);
  std::lock_guard<std::mutex> lock(s.state);
  s.node_owner[id] = {this, node};
}

void CuptiTracer::map_graph(void* cuda_graph, int node) {
  CuptiSession& s = CuptiSession::get();
  uint32_t id = 0;
  const CUptiResult r = s.api.graph_id(static_cast<CUgraph>(cuda_graph), &id);
  if (r != CUPTI_SUCCESS) throw CudaError(s.error(r, "cuptiGetGraphId"));
  if (s.debug)
    std::fprintf(stderr, "eagle trace: graph %u belongs to recorded node %d\n", id, node);
  std::lock_guard<std::mutex> lock(s.state);
  s.graph_owner[id] = {this, node};
}

void CuptiTracer::map_exec(void* cuda_exec) {
  CuptiSession& s = CuptiSession::get();
  uint32_t id = 0;
  if (!s.api.graph_exec_id ||
      s.api.graph_exec_id(static_cast<CUgraphExec>(cuda_exec), &id) != CUPTI_SUCCESS)
    return;  // the clone callbacks' graphs still tell (seed_of_graph)
  if (s.debug) std::fprintf(stderr, "eagle trace: executable graph %u is traced\n", id);
  std::lock_guard<std::mutex> lock(s.state);
  s.graph_owner.try_emplace(id, std::pair<CuptiTracer*, int>{this, -1});
}

int CuptiTracer::sole_child_node(DeviceRecord& r, const LaunchShape* shape) const {
  if (auto it = child_work_.find(r.kernel); it != child_work_.end() && it->second.size() == 1)
    return it->second.begin()->first;
  r.work = work_key(r.kernel, shape);  // only where the name alone does not tell
  if (auto it = child_shapes_.find(r.work); it != child_shapes_.end() && it->second.size() == 1)
    return it->second.begin()->first;
  return -1;
}

SharedWork CuptiTracer::shared_child_work() const {
  CuptiSession& s = CuptiSession::get();
  std::lock_guard<std::mutex> lock(s.state);
  SharedWork out;
  for (const auto& [key, nodes] : child_shapes_)
    if (nodes.size() > 1)
      out.emplace(key, std::vector<std::pair<int, int>>(nodes.begin(), nodes.end()));
  return out;
}

namespace {

// The child nodes with their kernel names demangled, each node of work counted by its name and
// by its work key. Not through kernel_name's cache: that is keyed by CUPTI's name pointers, and
// these strings' buffers are reused.
std::vector<ChildNode> demangled(const std::vector<ChildNode>& inner, int node, bool debug,
                                 std::unordered_map<std::string, std::map<int, int>>& by_name,
                                 std::unordered_map<std::string, std::map<int, int>>& by_key) {
  std::vector<ChildNode> out;
  for (const ChildNode& n : inner) {
    ChildNode d{n.kernel.empty() ? std::string() : demangle(n.kernel.c_str()), n.shape,
                n.holds_graph, demangled(n.inner, node, debug, by_name, by_key)};
    if (!d.kernel.empty()) {
      const std::string key = work_key(d.kernel, d.shape ? &*d.shape : nullptr);
      if (debug)
        std::fprintf(stderr, "eagle trace: %s runs in recorded node %d\n", key.c_str(), node);
      ++by_name[d.kernel][node];
      ++by_key[key][node];
    }
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace

void CuptiTracer::map_child_nodes(void* cuda_node, int node, const std::vector<ChildNode>& inner) {
  CuptiSession& s = CuptiSession::get();
  uint64_t id = 0;
  const CUptiResult r = s.api.node_id(static_cast<CUgraphNode>(cuda_node), &id);
  if (r != CUPTI_SUCCESS) throw CudaError(s.error(r, "cuptiGetGraphNodeId"));
  std::lock_guard<std::mutex> lock(s.state);
  child_nodes_[id] = {node, demangled(inner, node, s.debug, child_work_, child_shapes_)};
}

void CuptiTracer::predict_flattened(void* cuda_exec) {
  CuptiSession& s = CuptiSession::get();
  uint32_t exec = 0;
  if (!s.api.graph_exec_id ||
      s.api.graph_exec_id(static_cast<CUgraphExec>(cuda_exec), &exec) != CUPTI_SUCCESS)
    return;
  std::lock_guard<std::mutex> lock(s.state);
  candidates_.clear();  // an earlier instantiation's ids are not seen again
  const auto clones = s.clones_into.find(exec);
  if (clones == s.clones_into.end() || clones->second.empty()) return;
  const std::map<uint32_t, uint64_t>& by_index = clones->second;
  // The top-level nodes hold indices 0..n-1; flattened nodes come after them.
  if (by_index.rbegin()->first + 1 != by_index.size()) return;
  std::vector<std::pair<int, const std::vector<ChildNode>*>> tops;
  for (const auto& [index, original] : by_index) {  // index order: 0, 1, ...
    const auto it = child_nodes_.find(original);
    tops.emplace_back(it == child_nodes_.end() ? -1 : it->second.node,
                      it == child_nodes_.end() ? nullptr : &it->second.inner);
  }
  candidates_ = flattened_orders(exec, tops);
  if (s.debug)
    std::fprintf(stderr,
                 "eagle trace: executable graph %u: %zu candidate orders of %zu flattened nodes\n",
                 exec, candidates_.size(), candidates_.empty() ? 0 : candidates_[0].at.size());
}

std::vector<DeviceRecord> CuptiTracer::take() {
  CuptiSession& s = CuptiSession::get();
  // Blocking: the buffers come back through buffer_completed before it returns.
  const CUptiResult r = s.api.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  if (r != CUPTI_SUCCESS) throw CudaError(s.error(r, "cuptiActivityFlushAll"));
  std::lock_guard<std::mutex> lock(s.state);
  place_flattened(pending_, candidates_,
                  [&](std::size_t i, const DeviceRecord& r, const std::string& expected) {
                    if (s.debug)
                      std::fprintf(stderr,
                                   "eagle trace: candidate order %zu dropped: node id %llu ran "
                                   "%s, not %s\n",
                                   i, static_cast<unsigned long long>(r.node_id), r.kernel.c_str(),
                                   expected.c_str());
                  });
  return std::exchange(pending_, {});
}

}  // namespace eagle::detail

#endif  // EAGLE_HAVE_CUDA
