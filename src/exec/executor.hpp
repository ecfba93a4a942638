// Internal: what the graph hands an executor, and what an executor does.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "eagle/core/device.hpp"
#include "eagle/kernel/kernel.hpp"

namespace eagle {
class Stream;
class ThreadTeam;
}  // namespace eagle

namespace eagle::detail {

// One node with its arguments resolved to real pointers. The graph owns these and rewrites
// `args` / `copy_src` / `copy_dst` on bind; the executor reads them.
struct PlannedNode {
  enum class Kind : uint8_t { kernel, copy, if_, switch_, while_, fork };
  Kind kind = Kind::kernel;
  std::string label;
  // Kernel nodes: what runs (an ordinary kernel, a planned operation, a library call) and its
  // argument block.
  std::shared_ptr<const Call> call;
  ArgBlock args;
  // The call's workspace where the graph placed it (its arena slot), else null: the executor
  // allocates one of its own.
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
  void* copy_dst = nullptr;
  const void* copy_src = nullptr;
  std::size_t copy_bytes = 0;
  std::vector<int> deps;
  int64_t traffic_bytes = 0;  // bytes its arrays span (BuildOptions::defer_side_roots)
  std::vector<int> waits;     // in a fork's branch: items of earlier branches to wait for
  // Control nodes: the one-cell u32 condition and the arms (planned node indices, in order).
  const uint32_t* cond = nullptr;
  std::vector<std::vector<int>> bodies;
};

// What an executor runs: the planned nodes and the top-level list (bodies hang off control
// nodes). `nodes` must outlive the executor; the graph rewrites their pointers on bind.
struct Plan {
  std::vector<PlannedNode> nodes;
  std::vector<int> top;
  bool control_flow = false;
};

struct CudaOptions {
  // Build IF/ELSE and SWITCH from plain IF nodes and one decision kernel, as on drivers
  // without them (also forced by tests).
  bool plain_if_only = false;
  bool prioritize_chains = false;  // BuildOptions::prioritize_chains
  bool defer_side_roots = false;   // BuildOptions::defer_side_roots
  bool memsets_as_kernels = true;  // BuildOptions::memsets_as_kernels
};

// Per node (by planned node index, sized as `nodes`): 1 when a node of `list` waits on it (a
// dependency or a fork branch's wait), else 0: the list's own 0s are its sinks.
std::vector<char> waited_on(const std::vector<PlannedNode>& nodes, const std::vector<int>& list);

// Per position of `list`: its node's dependencies less those another of them implies (one that
// an other dependency depends on, directly or not), in their order. Dependencies outside the
// list's earlier nodes are kept as they are.
std::vector<std::vector<int>> essential_deps(const std::vector<PlannedNode>& nodes,
                                             const std::vector<int>& list);

// BuildOptions::defer_side_roots: the node of `list` the list's other roots (nodes with no
// dependency) are to follow, the root with the most traffic_bytes (the first of equals); -1
// when the list has fewer than two roots.
int heaviest_root(const std::vector<PlannedNode>& nodes, const std::vector<int>& list);

// The library handles an executor owns: one per library its calls declare, made on first use
// and destroyed with the executor.
class LibraryHandles {
 public:
  void* get(const Library* library, Device device, void* stream) {
    auto& slot = handles_[library];
    if (!slot) slot = std::shared_ptr<void>(library->create(device, stream), library->destroy);
    return slot.get();
  }

 private:
  std::map<const Library*, std::shared_ptr<void>> handles_;
};

// Where a tracing executor writes when each node ran (Graph::set_tracing). Thread-safe.
struct TraceSink {
  struct Record {
    int node;  // -1: a device record of the graph that no node claims (see device_kernel)
    int64_t launch;
    std::thread::id thread;  // CPU: the worker
    int64_t begin_ns, end_ns;
    std::string device_kernel = {};  // GPU: the CUDA kernel ("memcpy", "memset")
    int64_t stream = -1;             // GPU: CUPTI's stream id; -1 on the CPU
  };
  void add(const Record& r) {
    std::lock_guard<std::mutex> lock(mutex);
    records.push_back(r);
  }
  std::mutex mutex;
  std::vector<Record> records;
  int64_t launch = 0;  // the launch being run
};

class Executor {
 public:
  virtual ~Executor() = default;
  // Times every node of every launch into `sink` from now on (nullptr: stop). Throws
  // NotSupported where the backend cannot (a CUDA graph needs CUPTI), changing nothing.
  virtual void set_trace(TraceSink* sink) = 0;
  // Brings the sink up to date with the launches so far (a GPU waits for them and collects
  // CUPTI's records); the CPU writes as it runs.
  virtual void collect_trace() {}
  virtual void launch(int n) = 0;
  virtual void synchronize() = 0;
  // Re-reads the arguments of `nodes`; false when one cannot be patched (the graph rebuilds),
  // with `why` saying which node and what refused.
  virtual bool patch(const std::vector<int>& nodes, std::string& why) = 0;
  virtual std::string backend() const = 0;
  virtual std::string schedule() const = 0;
  virtual int native_node_count() const = 0;
  virtual void* native_graph() const { return nullptr; }
  virtual void* native_graph_exec() const { return nullptr; }
};

std::unique_ptr<Executor> make_cpu_executor(const Plan& plan, int threads);
// Throws NotSupported naming a node without a CUDA version.
std::unique_ptr<Executor> make_cuda_executor(const Plan& plan, Device device, const Stream& stream,
                                             const CudaOptions& options);

}  // namespace eagle::detail
