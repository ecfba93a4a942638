// A recorded graph that is built once for a device and replayed with next to no host cost.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "eagle/core/array.hpp"
#include "eagle/core/device.hpp"
#include "eagle/core/stream.hpp"
#include "eagle/exec/arena.hpp"
#include "eagle/exec/trace.hpp"
#include "eagle/graph/recording.hpp"

namespace eagle {

struct BuildOptions {
  int threads = 0;  // CPU: size of the thread team (0 = one per hardware thread)
  // GPU: build if/else and switch from plain IF conditional nodes and one decision kernel, as
  // eagle does by itself on drivers without IF/ELSE or SWITCH nodes (CUDA < 12.8).
  bool plain_if_only = false;
  // The graph's own arrays live in this arena (from offset 0) instead of allocations of their
  // own: for graphs of which only one runs at a time (eagle/exec/arena.hpp). It must be on the
  // build's device and hold MemoryArena::bytes_for(recording, device) bytes: the arrays, then a
  // slot per call that asks for a workspace (a planned operation's, a library call's).
  std::shared_ptr<MemoryArena> arena = nullptr;
  // The stream the graph launches on; none: a stream of its own. Graphs that share an arena
  // share one (BucketSet does), so that one's launch is ordered after another's on the device
  // and never overlaps it in the arena's memory. Must be on the build's device.
  std::shared_ptr<Stream> stream = nullptr;
  // GPU: when a node that later nodes wait on and one that none waits on (a weight gradient a
  // training step's backward leaves beside its chain, say) are ready together, start the first:
  // the CUDA graph is instantiated with node priorities (cudaGraphInstantiateFlagUseNodePriority),
  // the top-level list's sinks at the device's least priority, its other calls at the greatest.
  // A node's priority orders the start of its blocks only; it never preempts one that runs.
  // Off by default: its effect on issue 12's steps is not measured yet.
  bool prioritize_chains = false;
  // GPU: the top-level calls that wait on nothing start after the heaviest of them (by the bytes
  // its arrays span), not beside it: a training step's forward starts first and its loss
  // cotangent's seed and counts (a fill, a count of targets) follow. Why: in issue 12's MLP step
  // (H100 traces) the first GEMM, a cluster launch, started only once such small kernels
  // launched before it had ended, 1.2-4.2 us into the step. Off by default.
  bool defer_side_roots = false;
  // GPU: the memset nodes of a call's own graph (cuDNN's attention zeroes part of its workspace
  // with one) run as kernel nodes writing the same bytes. A memset node between kernels left the
  // device idle 3.4-3.7 us on each side of it (H100, issue 12's attention step), two kernel
  // nodes 0.5 us; as kernels the step took 175.3 us against 184.7 (H100, session 28). On by
  // default; off runs the call's graph as it made it. The CPU ignores it.
  bool memsets_as_kernels = true;
};

namespace detail {
class Executor;
}

// Thread safety: build, launch, g(), synchronize and bind of one Graph are serialized by a mutex
// the graph holds, so two threads calling g() run one after the other and each returns after its
// own launch completed (the arrays g() returns are the graph's own: read or copy them before
// another launch). Introspection is safe while no build or bind runs. A moved-from Graph throws
// InvalidArgument from every method.
class Graph {
 public:
  // Runs `body` once with a recorder. Ordinary C++ control flow inside it decides at record
  // time; only the path taken is recorded. Refuses races with a RecordError.
  // RecordOptions{.record = true} keeps what reverse mode needs (eagle/diff/reverse.hpp).
  static Graph record(const std::function<void(Recorder&)>& body,
                      const RecordOptions& options = {});
  // A graph over a finished recording (RecordingBuilder::finish).
  static Graph from(std::shared_ptr<const Recording> recording);

  Graph(Graph&&) noexcept;
  Graph& operator=(Graph&&) noexcept;
  ~Graph();

  // ---- introspection (before or after build)
  const Recording& recording() const;
  const std::vector<NodeInfo>& nodes() const { return recording().nodes(); }
  std::vector<std::pair<int, int>> edges() const { return recording().edges(); }
  std::string to_json() const { return recording().to_json(); }
  std::string to_dot() const { return recording().to_dot(); }

  // ---- build
  // On a CUDA device: one CUDA graph, instantiated. On the CPU: a host schedule over a thread
  // team. Every param and buffer= array must live on `device`. Allocates the graph's arrays.
  void build(Device device, const BuildOptions& options = {});
  // Builds on the device where the params live (the CPU when there are none).
  void build();
  bool built() const;
  Device device() const;
  std::string backend() const;    // "cuda-graph" or "cpu-host-schedule"; "" before build
  std::string schedule() const;   // what the backend built, in words
  int native_node_count() const;  // nodes in the instantiated CUDA graph / the host schedule
  // Device bytes of the graph's own arrays: allocated at build, or laid out in the arena.
  std::size_t allocated_bytes() const;
  // Bytes of the workspaces its calls ask for (planned operations, library calls): in the arena
  // when built with one, else the executor's own allocations.
  std::size_t workspace_bytes() const;
  // Bytes of the copies the forward saves for reverse mode (RecordOptions::record).
  std::size_t saved_bytes() const { return recording().saved_bytes(); }
  // The array recording buffer `buffer` lives in once built (a param's or external's: the
  // caller's array bound now). For passes that read a built graph's arrays (the reverse pass).
  const Array& buffer_array(int buffer) const;
  // Interop: the cudaGraph_t and cudaGraphExec_t of a graph built on a GPU (nullptr otherwise).
  // Valid until the next build() or a rebuilding bind().
  void* native_graph() const;
  void* native_graph_exec() const;

  // ---- run
  // launch(1), wait, and the results. Nothing is recorded, allocated or compiled here. Then each
  // device check of the recording (Recorder::check) reads its flags and may throw what it found
  // (e.g. ragged::validate's InvalidArgument); the graph stays built and runs again.
  const std::vector<Array>& operator()();
  // n launches and one wait; the checks read the last launch's flags.
  const std::vector<Array>& operator()(int n);
  void launch(int n = 1);  // issue n launches on the graph's stream; does not wait
  void synchronize();
  const std::vector<Array>& results() const;
  const Stream& stream() const;

  // Swaps the array bound to param `name`, before or after build. Shape, dtype, device and
  // contiguity must match the array it replaces, and it must not share memory with another
  // array of the graph; on error the graph is unchanged and still runs. On the GPU each node
  // holding the array is patched in place (kernel parameters, a populated child graph updated,
  // a captured call captured again); a node that cannot be patched makes the graph rebuild, with
  // one warning.
  void bind(const std::string& name, const Array& array);
  int rebuild_count() const;  // rebuilds bind() had to do
  // Tracing (eagle/exec/trace.hpp): from set_tracing(true) on, every launch times each node;
  // trace() returns the events so far (label, scope, kernel, thread, begin and end), and
  // clear_trace() drops them. A graph built on the CPU traces from its host schedule; on a GPU
  // from CUPTI's activity records (trace() waits for the launches and collects them; turning
  // tracing on makes the CUDA graph again unless CUPTI already watched its instantiation), and
  // without CUPTI set_tracing(true) throws NotSupported with cupti_status()'s reason. Call after
  // build; a rebuild keeps tracing on.
  void set_tracing(bool on);
  std::vector<TraceEvent> trace() const;
  void clear_trace();

  // Where warnings go (default: standard error).
  void set_warning_handler(std::function<void(const std::string&)> handler);

 private:
  explicit Graph(std::shared_ptr<const Recording> rec);
  struct State;
  void check(const char* what) const;
  const Array& caller_array(int buffer) const;
  void check_bind_memory(int buffer, const Array& array, const std::string& who) const;
  std::unique_ptr<detail::Executor> make_executor(const State& s) const;
  std::shared_ptr<const Recording> rec_;
  std::unique_ptr<State> state_;
  std::unique_ptr<std::mutex> mutex_;
};

}  // namespace eagle
