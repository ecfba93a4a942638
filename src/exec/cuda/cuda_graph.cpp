// The CUDA backend: the nodes become one CUDA graph, made with the explicit graph API from the
// recorded edges and instantiated once. A call enters it the way it says it can (Call): as one
// kernel node, as a child graph it populates itself, or stream-captured (a capture of exactly
// one kernel becomes that kernel node). Param copies are memcpy nodes; device conditions are
// conditional nodes (IF, IF/ELSE, SWITCH, WHILE) whose bodies are built in place. bind() patches
// each entry the way it was made. Traces come from CUPTI (exec/cuda/cupti_tracer.hpp).
#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "eagle/core/error.hpp"
#include "eagle/core/stream.hpp"
#include "exec/cuda/conditions.hpp"
#include "exec/cuda/cupti_tracer.hpp"
#include "exec/cuda/driver.hpp"
#include "exec/cuda/graph_nodes.hpp"
#include "exec/cuda/memset_nodes.hpp"
#include "exec/executor.hpp"
#include "kernel/cuda_launch.hpp"
#include "util/cuda_check.hpp"

namespace eagle::detail {

#ifdef EAGLE_HAVE_CUDA

namespace {

using Kind = PlannedNode::Kind;

// IF/ELSE (size 2) and SWITCH conditional nodes arrived in CUDA 12.8; older drivers get the
// plain-IF construction. Probed once.
bool driver_has_if_else_and_switch() {
  static const bool has = [] {
    int version = 0;
    return cudaDriverGetVersion(&version) == cudaSuccess && version >= 12080;
  }();
  return has;
}

// How a call entered the graph, which decides how bind() patches it.
enum class Entry : uint8_t {
  none,
  kernel,           // Call::cuda_kernel: a kernel node with the argument block as its parameter
  populated,        // Call::populate_cuda_graph: a child graph node; `child` kept for updates
  captured_kernel,  // a capture of exactly one kernel, copied in as a kernel node
  captured_graph,   // any other capture: a child graph node
};

class CudaGraphExecutor final : public Executor {
 public:
  CudaGraphExecutor(const Plan& plan, Device device, const Stream& stream, CudaOptions options)
      : plan_(plan),
        nodes_(plan.nodes),
        device_(device),
        properties_(cached_properties(device)),
        stream_(static_cast<cudaStream_t>(stream.native())),
        plain_if_only_(options.plain_if_only || !driver_has_if_else_and_switch()),
        prioritize_(options.prioritize_chains),
        defer_side_roots_(options.defer_side_roots),
        memsets_as_kernels_(options.memsets_as_kernels) {
    DeviceGuard guard(device.ordinal());
    try {
      construct();
    } catch (...) {
      release();
      throw;
    }
  }
  ~CudaGraphExecutor() override { release(); }

  void launch(int n) override {
    for (int k = 0; k < n; ++k) {
      EAGLE_CUDA_CHECK(cudaGraphLaunch(exec_, stream_));
      if (sink_) ++sink_->launch;
    }
  }
  void synchronize() override { EAGLE_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

  void set_trace(TraceSink* sink) override {
    if (!sink) {
      tracer_.reset();
      sink_ = nullptr;
      return;
    }
    auto tracer = std::make_unique<CuptiTracer>();  // NotSupported without CUPTI: nothing changed
    // Records name the instantiated nodes; CUPTI maps them back only for instantiations it saw
    // in the session open now.
    if (watched_by_ == 0 || watched_by_ != CuptiTracer::session()) rebuild();
    map_nodes(*tracer);
    shared_work_ = tracer->shared_child_work();
    tracer_ = std::move(tracer);
    sink_ = sink;
    first_launch_ = sink->launch;
    launch_of_.clear();
  }

  // Every kernel, memcpy and memset of a launch carries the launch's correlation id (that of its
  // cudaGraphLaunch), and ids grow: the k-th id seen is the k-th launch since tracing began here.
  // A launch whose every node was skipped (an untaken IF arm) leaves no record; a graph with
  // conditions always has one (the kernel that sets them).
  void collect_trace() override {
    if (!tracer_) return;
    synchronize();
    std::vector<DeviceRecord> records = tracer_->take();
    std::vector<uint32_t> fresh;
    for (const DeviceRecord& r : records)
      if (!launch_of_.count(r.correlation)) fresh.push_back(r.correlation);
    std::sort(fresh.begin(), fresh.end());
    fresh.erase(std::unique(fresh.begin(), fresh.end()), fresh.end());
    for (uint32_t c : fresh) {
      const int64_t next = first_launch_ + static_cast<int64_t>(launch_of_.size());
      launch_of_[c] = next;
    }
    if (!shared_work_.empty())
      place_shared_work(
          records, shared_work_, [&](int n) { return top_level(n); },
          [&](int a, int b) { return depends_on(b, a); });
    std::sort(records.begin(), records.end(),
              [](const DeviceRecord& a, const DeviceRecord& b) { return a.begin_ns < b.begin_ns; });
    for (DeviceRecord& r : records)
      sink_->add({r.node, launch_of_[r.correlation], std::thread::id(),
                  static_cast<int64_t>(r.begin_ns), static_cast<int64_t>(r.end_ns),
                  std::move(r.kernel), static_cast<int64_t>(r.stream)});
  }

  bool patch(const std::vector<int>& ids, std::string& why) override {
    DeviceGuard guard(device_.ordinal());
    for (int i : ids) {
      const PlannedNode& n = nodes_[i];
      if (n.kind == Kind::copy) {
        EAGLE_CUDA_CHECK(cudaGraphExecMemcpyNodeSetParams1D(
            exec_, handles_[i], n.copy_dst, n.copy_src, n.copy_bytes, cudaMemcpyDeviceToDevice));
      } else if (n.kind == Kind::kernel) {
        std::string refused;
        if (!patch_call(i, refused)) {
          why = "node " + std::to_string(i) + " '" + n.label + "': " + refused;
          return false;
        }
      } else if (n.kind != Kind::fork) {
        // The cell moved: the kernels that read it set the condition.
        conditions_[i].cell = n.cond;
        for (cudaGraphNode_t setter : setters_[i]) {
          cudaKernelNodeParams p = condition_params(i);
          EAGLE_CUDA_CHECK(cudaGraphExecKernelNodeSetParams(exec_, setter, &p));
        }
      }
    }
    return true;
  }

  std::string backend() const override { return "cuda-graph"; }
  std::string schedule() const override {
    std::string s = "CUDA graph on " + device_.str() + ": " + std::to_string(native_node_count()) +
                    " nodes (" + std::to_string(kernels_) + " kernel, " + std::to_string(copies_) +
                    " memcpy, " + std::to_string(children_) + " child graphs";
    if (forks_ > 0) s += ", " + std::to_string(forks_) + " fork join";
    if (memset_kernels_ > 0)
      s += ", " + std::to_string(memset_kernels_) +
           (memset_kernels_ == 1 ? " memset runs as a kernel" : " memsets run as kernels");
    if (conditionals_ > 0)
      s += ", " + std::to_string(conditionals_) + " conditional" +
           (plain_if_only_ ? " built from plain IF nodes" : "");
    return s + ")";
  }
  void* native_graph() const override { return graph_; }
  void* native_graph_exec() const override { return exec_; }
  int native_node_count() const override {
    std::size_t n = 0;
    EAGLE_CUDA_CHECK(cudaGraphGetNodes(graph_, nullptr, &n));
    return static_cast<int>(n);
  }

 private:
  // ---- calls

  CallContext context(int i, cudaStream_t stream) {
    const PlannedNode& n = nodes_[i];
    CallContext ctx;
    ctx.device = device_;
    ctx.stream = stream;
    if (const Library* library = n.call->library())
      ctx.handle = handles_by_library_.get(library, device_, stream_);
    const std::size_t bytes = n.call->workspace_bytes(n.args, device_);
    if (n.workspace && bytes <= n.workspace_bytes) {  // its slot in the graph's arena
      ctx.workspace = n.workspace;
      ctx.workspace_bytes = n.workspace_bytes;
      return ctx;
    }
    if (bytes > workspace_bytes_[i]) {
      // A launch in flight may still use the old one: it is kept until the executor dies.
      if (workspaces_[i]) retired_.push_back(workspaces_[i]);
      workspaces_[i] = nullptr;
      EAGLE_CUDA_CHECK(cudaMalloc(&workspaces_[i], bytes));
      workspace_bytes_[i] = bytes;
    }
    ctx.workspace = workspaces_[i];
    ctx.workspace_bytes = workspace_bytes_[i];
    return ctx;
  }

  cudaKernelNodeParams kernel_params(int i, const CudaLaunch& launch) {
    cudaKernelNodeParams p{};
    p.func = const_cast<void*>(launch.kernel);
    p.gridDim = dim3(launch.shape.grid[0], launch.shape.grid[1], launch.shape.grid[2]);
    p.blockDim = dim3(launch.shape.block[0], launch.shape.block[1], launch.shape.block[2]);
    p.sharedMemBytes = launch.shape.shared_bytes;
    // The runtime copies the argument block when the node is added or set.
    arg_pointers_[i] = const_cast<void*>(nodes_[i].args.data());
    p.kernelParams = &arg_pointers_[i];
    return p;
  }

  // Runs the call into a new graph on a side stream; returns that graph (the caller owns it).
  cudaGraph_t capture(int i) {
    cudaStream_t side = nullptr;
    EAGLE_CUDA_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    cudaGraph_t child = nullptr;
    try {
      const CallContext ctx = context(i, side);
      EAGLE_CUDA_CHECK(cudaStreamBeginCapture(side, cudaStreamCaptureModeThreadLocal));
      try {
        nodes_[i].call->run(nodes_[i].args, ctx);
      } catch (...) {
        cudaStreamEndCapture(side, &child);
        throw;
      }
      EAGLE_CUDA_CHECK(cudaStreamEndCapture(side, &child));
    } catch (...) {
      if (child) cudaGraphDestroy(child);
      cudaStreamDestroy(side);
      throw;
    }
    cudaStreamDestroy(side);
    return child;
  }

  // ---- priorities (CudaOptions::prioritize_chains)

  static constexpr int kNoPriority = -1000;

  // The top-level calls later nodes wait on at the device's greatest priority, the list's sinks
  // at its least; nothing else has one.
  void assign_priorities() {
    priority_.assign(nodes_.size(), kNoPriority);
    if (!prioritize_) return;
    int least = 0, greatest = 0;
    EAGLE_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    const std::vector<char> waited = waited_on(nodes_, plan_.top);
    for (int i : plan_.top)
      if (nodes_[i].kind == Kind::kernel) priority_[i] = waited[i] ? greatest : least;
  }

  static void set_priority(cudaGraphNode_t node, int priority) {
    if (priority == kNoPriority) return;
    cudaLaunchAttributeValue v{};
    v.priority = priority;
    EAGLE_CUDA_CHECK(cudaGraphKernelNodeSetAttribute(node, cudaLaunchAttributePriority, &v));
  }

  // Every kernel node of `graph` and of the graphs it nests at `priority`.
  static void prioritize(cudaGraph_t graph, int priority) {
    if (priority == kNoPriority) return;
    for (cudaGraphNode_t node : graph_nodes(graph)) {
      cudaGraphNodeType type = cudaGraphNodeTypeEmpty;
      EAGLE_CUDA_CHECK(cudaGraphNodeGetType(node, &type));
      if (type == cudaGraphNodeTypeKernel) {
        set_priority(node, priority);
      } else if (type == cudaGraphNodeTypeGraph) {
        cudaGraph_t inner = nullptr;
        EAGLE_CUDA_CHECK(cudaGraphChildGraphNodeGetGraph(node, &inner));
        prioritize(inner, priority);
      }
    }
  }

  // A call's child graph made ready to run in node i's place: its memset nodes as kernel nodes
  // (CudaOptions::memsets_as_kernels), its kernels at the node's priority.
  // Returns how many memset nodes it replaced.
  int make_runnable(cudaGraph_t graph, int i) {
    const int replaced = memsets_as_kernels_ ? memsets_as_kernels(graph) : 0;
    prioritize(graph, priority_[i]);
    return replaced;
  }

  // A populated graph made runnable. With memsets as kernels, a copy, so that the original stays
  // as the call made it (the call's update_cuda_graph works on that): the caller destroys a
  // result unequal to `graph`. Else `graph` itself, prioritized in place (no copy on bind).
  cudaGraph_t runnable_populated(cudaGraph_t graph, int i, int* replaced = nullptr) {
    if (!memsets_as_kernels_) {
      make_runnable(graph, i);
      return graph;
    }
    cudaGraph_t copy = nullptr;
    EAGLE_CUDA_CHECK(cudaGraphClone(&copy, graph));
    try {
      const int n = make_runnable(copy, i);
      if (replaced) *replaced += n;
    } catch (...) {
      cudaGraphDestroy(copy);
      throw;
    }
    return copy;
  }

  // The one kernel node of `graph`, or nullptr when it holds anything else.
  static cudaGraphNode_t only_kernel(cudaGraph_t graph) {
    std::size_t count = 0;
    EAGLE_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &count));
    if (count != 1) return nullptr;
    cudaGraphNode_t only = nullptr;
    EAGLE_CUDA_CHECK(cudaGraphGetNodes(graph, &only, &count));
    cudaGraphNodeType type = cudaGraphNodeTypeEmpty;
    EAGLE_CUDA_CHECK(cudaGraphNodeGetType(only, &type));
    return type == cudaGraphNodeTypeKernel ? only : nullptr;
  }

  static CUDA_KERNEL_NODE_PARAMS_v2 driver_params(cudaGraphNode_t node) {
    CUDA_KERNEL_NODE_PARAMS_v2 p{};
    check_driver(
        driver_graph_calls().kernel_node_get_params(reinterpret_cast<CUgraphNode>(node), &p),
        "cuGraphKernelNodeGetParams");
    return p;
  }

  void add_call(cudaGraph_t graph, int i, const std::vector<cudaGraphNode_t>& deps) {
    const PlannedNode& n = nodes_[i];
    CudaLaunch launch;
    if (n.call->cuda_kernel(n.args, properties_, launch)) {
      cudaKernelNodeParams p = kernel_params(i, launch);
      EAGLE_CUDA_CHECK(cudaGraphAddKernelNode(&handles_[i], graph, deps.data(), deps.size(), &p));
      set_priority(handles_[i], priority_[i]);
      entries_[i] = Entry::kernel;
      // The driver's form of the node, kept for bind: setting kernel params through the driver
      // costs a third of the runtime's call, which resolves the function again each time.
      kernel_nodes_[i] = driver_params(handles_[i]);
      ++kernels_;
      return;
    }
    cudaGraph_t child = nullptr;
    EAGLE_CUDA_CHECK(cudaGraphCreate(&child, 0));
    bool populated = false;
    try {
      populated = n.call->populate_cuda_graph(n.args, context(i, stream_), child);
    } catch (...) {
      cudaGraphDestroy(child);
      throw;
    }
    if (populated) {
      children_graphs_[i] = child;  // kept as the call made it: update_cuda_graph works on it
      const cudaGraph_t run = runnable_populated(child, i, &memset_kernels_);
      const cudaError_t added =
          cudaGraphAddChildGraphNode(&handles_[i], graph, deps.data(), deps.size(), run);
      if (run != child) cudaGraphDestroy(run);
      EAGLE_CUDA_CHECK(added);
      entries_[i] = Entry::populated;
      ++children_;
      return;
    }
    cudaGraphDestroy(child);
    child = capture(i);
    try {
      if (cudaGraphNode_t only = only_kernel(child)) {
        const CUDA_KERNEL_NODE_PARAMS_v2 p = driver_params(only);
        check_driver(
            driver_graph_calls().add_kernel_node(
                reinterpret_cast<CUgraphNode*>(&handles_[i]), reinterpret_cast<CUgraph>(graph),
                reinterpret_cast<const CUgraphNode*>(deps.data()), deps.size(), &p),
            "cuGraphAddKernelNode");
        // A Hopper GEMM launches with cluster dims: carry the captured node's attributes over.
        check_driver(
            driver_graph_calls().kernel_node_copy_attributes(
                reinterpret_cast<CUgraphNode>(handles_[i]), reinterpret_cast<CUgraphNode>(only)),
            "cuGraphKernelNodeCopyAttributes");
        set_priority(handles_[i], priority_[i]);
        entries_[i] = Entry::captured_kernel;
        ++kernels_;
      } else {
        memset_kernels_ += make_runnable(child, i);
        EAGLE_CUDA_CHECK(
            cudaGraphAddChildGraphNode(&handles_[i], graph, deps.data(), deps.size(), child));
        entries_[i] = Entry::captured_graph;
        ++children_;
      }
    } catch (...) {
      cudaGraphDestroy(child);
      throw;
    }
    cudaGraphDestroy(child);
  }

  // bind() moved the arrays of call node i: patch its entry in the instantiated graph. False
  // when it cannot be patched (the graph is rebuilt).
  bool patch_call(int i, std::string& why) {
    const PlannedNode& n = nodes_[i];
    auto fail = [&why](std::string reason) {
      why = std::move(reason);
      return false;
    };
    auto runtime = [&fail](cudaError_t err, const char* what) {
      if (err == cudaSuccess) return true;
      // Not sticky, but the runtime keeps it as its last error: cleared, so that the next launch
      // check (cudaGetLastError after a kernel) does not report it as its own.
      (void)cudaGetLastError();
      return fail(std::string(what) + " failed: " + cudaGetErrorName(err));
    };
    switch (entries_[i]) {
      case Entry::kernel: {
        // A kernel entry's function and geometry depend on shapes, dtypes and strides only (the
        // Call contract), which bind() keeps: only the argument block moved. Set it through the
        // driver, with the node's driver parameters kept from build.
        CUDA_KERNEL_NODE_PARAMS_v2 p = kernel_nodes_[i];
        arg_pointers_[i] = const_cast<void*>(n.args.data());
        p.kernelParams = &arg_pointers_[i];
        p.extra = nullptr;
        const CUresult r = driver_graph_calls().exec_kernel_node_set_params(
            reinterpret_cast<CUgraphExec>(exec_), reinterpret_cast<CUgraphNode>(handles_[i]), &p);
        return r == CUDA_SUCCESS ||
               fail("cuGraphExecKernelNodeSetParams failed: CUresult " + std::to_string(r));
      }
      case Entry::populated: {
        cudaGraph_t child = children_graphs_[i];
        const CallContext ctx = context(i, stream_);
        if (!n.call->update_cuda_graph(n.args, ctx, child)) {
          cudaGraph_t fresh = nullptr;
          EAGLE_CUDA_CHECK(cudaGraphCreate(&fresh, 0));
          if (!n.call->populate_cuda_graph(n.args, ctx, fresh)) {
            cudaGraphDestroy(fresh);
            return fail("the call neither updates nor populates its graph again");
          }
          cudaGraphDestroy(child);
          children_graphs_[i] = child = fresh;
        }
        // Made runnable as at build (the same rewrite, so the same topology the update needs):
        // memsets as kernels when asked, the priority on its kernels (a fresh population has
        // none yet).
        const cudaGraph_t run = runnable_populated(child, i);
        const bool ok = runtime(cudaGraphExecChildGraphNodeSetParams(exec_, handles_[i], run),
                                "cudaGraphExecChildGraphNodeSetParams (populated graph)");
        if (run != child) cudaGraphDestroy(run);
        return ok;
      }
      case Entry::captured_kernel: {
        cudaGraph_t child = capture(i);
        bool ok = false;
        if (cudaGraphNode_t only = only_kernel(child)) {
          const CUDA_KERNEL_NODE_PARAMS_v2 p = driver_params(only);
          const CUresult r = driver_graph_calls().exec_kernel_node_set_params(
              reinterpret_cast<CUgraphExec>(exec_), reinterpret_cast<CUgraphNode>(handles_[i]), &p);
          ok = r == CUDA_SUCCESS ||
               fail("cuGraphExecKernelNodeSetParams of the captured kernel failed: CUresult " +
                    std::to_string(r));
        } else {
          fail("captured again, the call is no longer one kernel");
        }
        cudaGraphDestroy(child);
        return ok;
      }
      case Entry::captured_graph: {
        cudaGraph_t child = capture(i);
        make_runnable(child, i);
        const bool ok = runtime(cudaGraphExecChildGraphNodeSetParams(exec_, handles_[i], child),
                                "cudaGraphExecChildGraphNodeSetParams (captured graph)");
        cudaGraphDestroy(child);
        return ok;
      }
      case Entry::none:
        break;
    }
    return fail("the node was not entered as a call");
  }

  // ---- conditions

  cudaKernelNodeParams condition_params(int i) {
    cudaKernelNodeParams p{};
    p.func = const_cast<void*>(set_conditions_kernel());
    p.gridDim = dim3(1);
    p.blockDim = dim3(1);
    p.kernelParams = reinterpret_cast<void**>(&condition_pointers_[i]);
    return p;
  }

  void construct() {
    EAGLE_CUDA_CHECK(cudaGraphCreate(&graph_, 0));
    const std::size_t n = nodes_.size();
    handles_.resize(n);
    entries_.resize(n, Entry::none);
    arg_pointers_.resize(n);
    kernel_nodes_.resize(n);
    children_graphs_.resize(n, nullptr);
    workspaces_.resize(n, nullptr);
    workspace_bytes_.resize(n, 0);
    conditions_.resize(n);
    condition_pointers_.resize(n);
    setters_.resize(n);
    for (std::size_t i = 0; i < n; ++i) condition_pointers_[i] = &conditions_[i];
    assign_priorities();
    add_list(graph_, plan_.top, {}, defer_side_roots_);
    watched_by_ = CuptiTracer::session();
    EAGLE_CUDA_CHECK(cudaGraphInstantiate(
        &exec_, graph_, prioritize_ ? cudaGraphInstantiateFlagUseNodePriority : 0));
  }

  // The graph made again from the plan as it stands (bind rewrites its arguments), as a fresh
  // executor would: for tracing, whose node map needs an instantiation CUPTI watched.
  void rebuild() {
    DeviceGuard guard(device_.ordinal());
    synchronize();
    release();
    handles_.clear();
    entries_.clear();
    arg_pointers_.clear();
    kernel_nodes_.clear();
    workspace_bytes_.clear();
    conditions_.clear();
    condition_pointers_.clear();
    setters_.clear();
    body_graphs_.clear();
    kernels_ = copies_ = children_ = conditionals_ = forks_ = memset_kernels_ = 0;
    construct();
  }

  // ---- tracing

  // Whether node n is of the top-level list (it runs once per launch; an arm's or a loop body's
  // may not, or many times).
  bool top_level(int n) const {
    return std::find(plan_.top.begin(), plan_.top.end(), n) != plan_.top.end();
  }

  // Whether top-level node `b` waits, through a chain of dependencies, for node `a` to finish
  // (the edges between top-level nodes are their deps and waits; a fork's or a condition's inner
  // nodes sit between its own deps and the fork).
  bool depends_on(int b, int a) const {
    std::vector<char> seen(nodes_.size(), 0);
    std::vector<int> stack{b};
    while (!stack.empty()) {
      const int n = stack.back();
      stack.pop_back();
      for (const std::vector<int>* edges : {&nodes_[n].deps, &nodes_[n].waits})
        for (int d : *edges) {
          if (d == a) return true;
          if (!seen[static_cast<std::size_t>(d)]) {
            seen[static_cast<std::size_t>(d)] = 1;
            stack.push_back(d);
          }
        }
    }
    return false;
  }

  // Every CUDA graph node made for a recorded node, nodes inside its child graphs too, and every
  // graph they live in, so that a record maps back to the node.
  void map_nodes(CuptiTracer& tracer) {
    tracer.map_graph(graph_);
    tracer.map_exec(exec_);
    for (cudaGraph_t body : body_graphs_) tracer.map_graph(body);
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      const int node = static_cast<int>(i);
      if (handles_[i]) map_tree(tracer, handles_[i], node);
      for (cudaGraphNode_t setter : setters_[i]) tracer.map_node(setter, node);
    }
    tracer.predict_flattened(exec_);
  }

  // Maps `handle` and, for a child graph node, every node inside its child graph to `node`;
  // returns what those inner nodes run, in their graph's order. The top-level call hands the
  // whole tree to the tracer (map_child_nodes).
  std::vector<ChildNode> map_tree(CuptiTracer& tracer, cudaGraphNode_t handle, int node,
                                  bool in_child = false) {
    tracer.map_node(handle, node);
    cudaGraphNodeType type = cudaGraphNodeTypeEmpty;
    EAGLE_CUDA_CHECK(cudaGraphNodeGetType(handle, &type));
    if (type != cudaGraphNodeTypeGraph) return {};
    cudaGraph_t child = nullptr;  // the parent's own copy, owned by the node
    EAGLE_CUDA_CHECK(cudaGraphChildGraphNodeGetGraph(handle, &child));
    tracer.map_graph(child, node);
    std::vector<ChildNode> runs;
    for (cudaGraphNode_t n : graph_nodes(child)) {
      cudaGraphNodeType inner_type = cudaGraphNodeTypeEmpty;
      EAGLE_CUDA_CHECK(cudaGraphNodeGetType(n, &inner_type));
      ChildNode c = inner_work(n, inner_type);
      c.holds_graph = inner_type == cudaGraphNodeTypeGraph;
      c.inner = map_tree(tracer, n, node, true);
      runs.push_back(std::move(c));
    }
    if (!in_child) tracer.map_child_nodes(handle, node, runs);
    return runs;
  }

  // What a node inside a child graph runs (CUDA flattens child graphs on instantiation without
  // telling CUPTI where their nodes came from): its kernel's name (mangled) and launch shape,
  // "memcpy" or "memset" with no shape, or "" for a node that runs no work.
  static ChildNode inner_work(cudaGraphNode_t handle, cudaGraphNodeType type) {
    ChildNode w;
    if (type == cudaGraphNodeTypeMemcpy) w.kernel = "memcpy";
    if (type == cudaGraphNodeTypeMemset) w.kernel = "memset";
    if (type != cudaGraphNodeTypeKernel) return w;
    const DriverGraphCalls& d = driver_graph_calls();
    CUDA_KERNEL_NODE_PARAMS_v2 p{};
    if (d.kernel_node_get_params(reinterpret_cast<CUgraphNode>(handle), &p) != CUDA_SUCCESS)
      return w;
    LaunchShape& shape = w.shape.emplace();
    shape.grid[0] = p.gridDimX, shape.grid[1] = p.gridDimY, shape.grid[2] = p.gridDimZ;
    shape.block[0] = p.blockDimX, shape.block[1] = p.blockDimY, shape.block[2] = p.blockDimZ;
    shape.shared = p.sharedMemBytes;
    const char* name = nullptr;
    if (p.func && d.func_get_name && d.func_get_name(&name, p.func) == CUDA_SUCCESS && name)
      w.kernel = name;
    else if (p.kern && d.kernel_get_name && d.kernel_get_name(&name, p.kern) == CUDA_SUCCESS &&
             name)
      w.kernel = name;
    return w;
  }

  // Adds the nodes of one list (the top level or an arm) to `graph`; edges stay in the list.
  // `entry`: what the first item waits for (a fork branch starts after the fork's dependencies).
  void add_list(cudaGraph_t graph, const std::vector<int>& list,
                const std::vector<cudaGraphNode_t>& entry = {}, bool defer_roots = false) {
    // Each node waits on the dependencies no other of them implies: a redundant edge is one
    // more wait across the graph's streams before the node starts.
    const std::vector<std::vector<int>> essential = essential_deps(nodes_, list);
    // Under defer_side_roots (the top-level list), the heaviest root first, the others after it.
    const int lead = defer_roots ? heaviest_root(nodes_, list) : -1;
    std::vector<std::size_t> order;
    for (std::size_t k = 0; k < list.size(); ++k)
      if (list[k] == lead)
        order.insert(order.begin(), k);
      else
        order.push_back(k);
    for (std::size_t k : order) {
      const int i = list[k];
      const PlannedNode& n = nodes_[i];
      std::vector<cudaGraphNode_t> deps;
      for (int d : essential[k]) deps.push_back(handles_[d]);
      if (lead >= 0 && i != lead && n.deps.empty() && n.waits.empty())
        deps.push_back(handles_[lead]);
      for (int w : n.waits) deps.push_back(handles_[w]);  // built already: an earlier branch
      if (i == list.front()) deps.insert(deps.end(), entry.begin(), entry.end());
      switch (n.kind) {
        case Kind::copy:
          EAGLE_CUDA_CHECK(cudaGraphAddMemcpyNode1D(&handles_[i], graph, deps.data(), deps.size(),
                                                    n.copy_dst, n.copy_src, n.copy_bytes,
                                                    cudaMemcpyDeviceToDevice));
          ++copies_;
          break;
        case Kind::kernel:
          add_call(graph, i, deps);
          break;
        case Kind::fork:
          add_fork(graph, i, deps);
          break;
        default:
          add_conditional(graph, i, deps);
          break;
      }
    }
  }

  // The nodes of `list` that no other node of it waits on: where a WHILE body or a branch ends.
  std::vector<cudaGraphNode_t> sinks(const std::vector<int>& list) {
    const std::vector<char> waited = waited_on(nodes_, list);
    std::vector<cudaGraphNode_t> out;
    for (int i : list)
      if (!waited[i]) out.push_back(handles_[i]);
    return out;
  }

  cudaGraphNode_t add_setter(cudaGraph_t graph, int i, const std::vector<cudaGraphNode_t>& deps) {
    cudaGraphNode_t node = nullptr;
    cudaKernelNodeParams p = condition_params(i);
    EAGLE_CUDA_CHECK(cudaGraphAddKernelNode(&node, graph, deps.data(), deps.size(), &p));
    setters_[i].push_back(node);
    return node;
  }

  cudaGraphConditionalHandle new_handle(cudaGraph_t graph) {
    cudaGraphConditionalHandle h{};
    EAGLE_CUDA_CHECK(cudaGraphConditionalHandleCreate(&h, graph, 0, cudaGraphCondAssignDefault));
    return h;
  }

  // Adds a conditional node of `type` with `size` bodies after `dep`; returns its body graphs.
  cudaGraph_t* add_conditional_node(cudaGraph_t graph, cudaGraphNode_t dep,
                                    cudaGraphConditionalHandle h, cudaGraphConditionalNodeType type,
                                    unsigned size, cudaGraphNode_t* out) {
    cudaGraphNodeParams p{};
    p.type = cudaGraphNodeTypeConditional;
    p.conditional.handle = h;
    p.conditional.type = type;
    p.conditional.size = size;
    EAGLE_CUDA_CHECK(cudaGraphAddNode(out, graph, &dep, nullptr, 1, &p));
    ++conditionals_;
    return p.conditional.phGraph_out;
  }

  // Fills one arm's body graph; an empty arm gets an empty node (a body may not be empty).
  void add_body(cudaGraph_t body, const std::vector<int>& list) {
    if (list.empty()) {
      cudaGraphNode_t empty = nullptr;
      EAGLE_CUDA_CHECK(cudaGraphAddEmptyNode(&empty, body, nullptr, 0));
      return;
    }
    add_list(body, list);
  }

  void add_conditional(cudaGraph_t graph, int i, const std::vector<cudaGraphNode_t>& deps) {
    const PlannedNode& n = nodes_[i];
    ConditionArgs& c = conditions_[i];
    c.cell = n.cond;
    const unsigned arms = static_cast<unsigned>(n.bodies.size());
    const bool plain =
        plain_if_only_ && (n.kind == Kind::switch_ || (n.kind == Kind::if_ && arms == 2));
    if (!plain) {
      c.count = 1;
      c.mode = n.kind == Kind::switch_ ? ConditionMode::value : ConditionMode::non_zero;
      c.handles[0] = new_handle(graph);
      const cudaGraphNode_t setter = add_setter(graph, i, deps);
      const cudaGraphConditionalNodeType type = n.kind == Kind::while_    ? cudaGraphCondTypeWhile
                                                : n.kind == Kind::switch_ ? cudaGraphCondTypeSwitch
                                                                          : cudaGraphCondTypeIf;
      cudaGraph_t* bodies =
          add_conditional_node(graph, setter, c.handles[0], type, arms, &handles_[i]);
      for (unsigned k = 0; k < arms; ++k) {
        body_graphs_.push_back(bodies[k]);
        add_body(bodies[k], n.bodies[k]);
      }
      // A WHILE decides again after each turn: the body ends by reading the cell.
      if (n.kind == Kind::while_) add_setter(bodies[0], i, sinks(n.bodies[0]));
      return;
    }
    // The fallback: one plain IF per arm, all set by one decision kernel, joined by an empty node.
    if (arms > static_cast<unsigned>(kMaxPlainArms))
      throw NotSupported(
          "node " + std::to_string(i) + " '" + n.label + "': " + std::to_string(arms) +
          " arms; the plain-IF construction serves at most " + std::to_string(kMaxPlainArms));
    c.count = static_cast<int32_t>(arms);
    c.mode = n.kind == Kind::switch_ ? ConditionMode::plain_switch : ConditionMode::plain_if_else;
    for (unsigned k = 0; k < arms; ++k) c.handles[k] = new_handle(graph);
    const cudaGraphNode_t decision = add_setter(graph, i, deps);
    std::vector<cudaGraphNode_t> ifs(arms);
    for (unsigned k = 0; k < arms; ++k) {
      cudaGraph_t* body =
          add_conditional_node(graph, decision, c.handles[k], cudaGraphCondTypeIf, 1, &ifs[k]);
      body_graphs_.push_back(body[0]);
      add_body(body[0], n.bodies[k]);
    }
    EAGLE_CUDA_CHECK(cudaGraphAddEmptyNode(&handles_[i], graph, ifs.data(), ifs.size()));
  }

  // A fork's branches go into the same graph, each starting after the fork's dependencies; an
  // empty node joins their ends.
  void add_fork(cudaGraph_t graph, int i, const std::vector<cudaGraphNode_t>& deps) {
    std::vector<cudaGraphNode_t> ends;
    for (const auto& branch : nodes_[i].bodies) {
      if (branch.empty()) continue;
      add_list(graph, branch, deps);
      const auto s = sinks(branch);
      ends.insert(ends.end(), s.begin(), s.end());
    }
    if (ends.empty()) ends = deps;
    EAGLE_CUDA_CHECK(cudaGraphAddEmptyNode(&handles_[i], graph, ends.data(), ends.size()));
    ++forks_;
  }

  void release() {
    DeviceGuard guard(device_.ordinal());
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
    for (cudaGraph_t g : children_graphs_)
      if (g) cudaGraphDestroy(g);
    for (void* w : workspaces_)
      if (w) cudaFree(w);
    for (void* w : retired_) cudaFree(w);
    exec_ = nullptr;
    graph_ = nullptr;
    children_graphs_.clear();
    workspaces_.clear();
    retired_.clear();
  }

  const Plan& plan_;
  const std::vector<PlannedNode>& nodes_;
  Device device_;
  const DeviceProperties& properties_;  // read once: cuda_kernel runs per patched node
  cudaStream_t stream_;
  bool plain_if_only_;
  bool prioritize_;            // CudaOptions::prioritize_chains
  bool defer_side_roots_;      // CudaOptions::defer_side_roots
  bool memsets_as_kernels_;    // CudaOptions::memsets_as_kernels
  std::vector<int> priority_;  // per node: its CUDA priority, or kNoPriority
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  LibraryHandles handles_by_library_;
  std::vector<cudaGraphNode_t> handles_;  // per node: the node its dependents wait on
  std::vector<Entry> entries_;
  std::vector<void*> arg_pointers_;                       // per kernel node: its argument block
  std::vector<CUDA_KERNEL_NODE_PARAMS_v2> kernel_nodes_;  // per kernel node, as the driver has it
  std::vector<cudaGraph_t> children_graphs_;  // per populated node: the graph it populated
  std::vector<void*> workspaces_;
  std::vector<std::size_t> workspace_bytes_;
  std::vector<void*> retired_;             // workspaces replaced by larger ones; freed at the end
  std::vector<ConditionArgs> conditions_;  // per control node: what its setters read
  std::vector<ConditionArgs*> condition_pointers_;
  std::vector<std::vector<cudaGraphNode_t>> setters_;  // per control node: kernels setting it
  std::vector<cudaGraph_t> body_graphs_;               // conditional bodies (owned by their nodes)
  int kernels_ = 0, copies_ = 0, children_ = 0, conditionals_ = 0, forks_ = 0;
  int memset_kernels_ = 0;  // memset nodes of the calls' graphs run as kernels (at build)
  // Tracing (Graph::set_tracing): the tracer while on, the sink it feeds, the launch count at
  // which it began, each launch's correlation id seen so far, and the CUPTI session that watched
  // this graph's instantiation (0: none).
  std::unique_ptr<CuptiTracer> tracer_;
  TraceSink* sink_ = nullptr;
  int64_t first_launch_ = 0;
  std::map<uint32_t, int64_t> launch_of_;
  SharedWork shared_work_;  // kernel names several nodes' child graphs run (place_shared_work)
  uint64_t watched_by_ = 0;
};

}  // namespace

std::unique_ptr<Executor> make_cuda_executor(const Plan& plan, Device device, const Stream& stream,
                                             const CudaOptions& options) {
  return std::make_unique<CudaGraphExecutor>(plan, device, stream, options);
}

#else

std::unique_ptr<Executor> make_cuda_executor(const Plan&, Device, const Stream&,
                                             const CudaOptions&) {
  throw NotSupported("this build of eagle has no CUDA support");
}

#endif

}  // namespace eagle::detail
