// The CUDA backend: the nodes become one CUDA graph, made with the explicit graph API from the
// recorded edges and instantiated once: kernel nodes with eagle's argument block, memcpy nodes
// for param copies, child graphs stream-captured from opaque sequences (library calls), and
// conditional nodes (IF, IF/ELSE, SWITCH, WHILE) whose bodies are built in place.
#include <string>

#include "eagle/core/error.hpp"
#include "eagle/core/stream.hpp"
#include "exec/cuda/conditions.hpp"
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

class CudaGraphExecutor final : public Executor {
 public:
  CudaGraphExecutor(const Plan& plan, Device device, const Stream& stream, CudaOptions options)
      : plan_(plan),
        nodes_(plan.nodes),
        device_(device),
        properties_(cached_properties(device)),
        stream_(static_cast<cudaStream_t>(stream.native())),
        plain_if_only_(options.plain_if_only || !driver_has_if_else_and_switch()) {
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
    for (int k = 0; k < n; ++k) EAGLE_CUDA_CHECK(cudaGraphLaunch(exec_, stream_));
  }
  void synchronize() override { EAGLE_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

  bool patch(const std::vector<int>& ids) override {
    for (int i : ids)
      if (nodes_[i].impl.cuda_capture || nodes_[i].call) return false;
    for (int i : ids) {
      const PlannedNode& n = nodes_[i];
      if (n.kind == Kind::copy) {
        EAGLE_CUDA_CHECK(cudaGraphExecMemcpyNodeSetParams1D(
            exec_, handles_[i], n.copy_dst, n.copy_src, n.copy_bytes, cudaMemcpyDeviceToDevice));
      } else if (n.kind == Kind::kernel) {
        cudaKernelNodeParams p = kernel_params(n);
        EAGLE_CUDA_CHECK(cudaGraphExecKernelNodeSetParams(exec_, handles_[i], &p));
      } else {
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
                    " memcpy, " + std::to_string(captured_) + " captured child graphs";
    if (forks_ > 0) s += ", " + std::to_string(forks_) + " fork join";
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
  cudaKernelNodeParams kernel_params(const PlannedNode& n) {
    const CudaLaunchShape s = n.impl.cuda_shape(n.args, properties_);
    cudaKernelNodeParams p{};
    p.func = const_cast<void*>(n.impl.cuda_function);
    p.gridDim = dim3(s.grid[0], s.grid[1], s.grid[2]);
    p.blockDim = dim3(s.block[0], s.block[1], s.block[2]);
    p.sharedMemBytes = s.shared_bytes;
    // The runtime copies the argument block when the node is added or set.
    p.kernelParams = reinterpret_cast<void**>(&arg_pointers_[&n - nodes_.data()]);
    return p;
  }

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
    arg_pointers_.resize(n);
    workspaces_.resize(n, nullptr);
    conditions_.resize(n);
    condition_pointers_.resize(n);
    setters_.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      arg_pointers_[i] = const_cast<KernelArgs*>(&nodes_[i].args);
      condition_pointers_[i] = &conditions_[i];
    }
    add_list(graph_, plan_.top);
    EAGLE_CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_, 0));
  }

  // Adds the nodes of one list (the top level or an arm) to `graph`; edges stay in the list.
  // `entry`: what the first item waits for (a fork branch starts after the fork's dependencies).
  void add_list(cudaGraph_t graph, const std::vector<int>& list,
                const std::vector<cudaGraphNode_t>& entry = {}) {
    for (int i : list) {
      const PlannedNode& n = nodes_[i];
      std::vector<cudaGraphNode_t> deps;
      for (int d : n.deps) deps.push_back(handles_[d]);
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
          if (n.impl.cuda_function) {
            cudaKernelNodeParams p = kernel_params(n);
            EAGLE_CUDA_CHECK(
                cudaGraphAddKernelNode(&handles_[i], graph, deps.data(), deps.size(), &p));
            ++kernels_;
          } else if (n.impl.cuda_capture || n.call) {
            add_captured(graph, i, deps);
            ++captured_;
          } else {
            throw NotSupported("node " + std::to_string(i) + " '" + n.label +
                               "' has no CUDA implementation for its dtypes; build it on the CPU");
          }
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

  // The nodes of `list` that no other node of it waits on: where a WHILE body ends.
  std::vector<cudaGraphNode_t> sinks(const std::vector<int>& list) const {
    std::vector<bool> waited(nodes_.size(), false);
    for (int i : list)
      for (int d : nodes_[i].deps) waited[d] = true;
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
      for (unsigned k = 0; k < arms; ++k) add_body(bodies[k], n.bodies[k]);
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

  // An opaque sequence (a library call, a planned operation) is captured on a side stream into
  // its own graph, which becomes a child graph node; a capture of exactly one kernel becomes that
  // kernel node itself, so a planned single-kernel op adds no node. Its workspace lives as long
  // as the executor.
  void add_captured(cudaGraph_t graph, int i, const std::vector<cudaGraphNode_t>& deps) {
    const PlannedNode& n = nodes_[i];
    const std::size_t ws = n.call                  ? n.call->workspace_bytes()
                           : n.impl.cuda_workspace ? n.impl.cuda_workspace(n.args)
                                                   : 0;
    if (ws > 0) EAGLE_CUDA_CHECK(cudaMalloc(&workspaces_[i], ws));
    cudaStream_t side = nullptr;
    EAGLE_CUDA_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    cudaGraph_t child = nullptr;
    try {
      EAGLE_CUDA_CHECK(cudaStreamBeginCapture(side, cudaStreamCaptureModeThreadLocal));
      try {
        if (n.call) {
          n.call->run(n.call_data.data(), workspaces_[i], side, nullptr);
        } else {
          n.impl.cuda_capture(n.args, workspaces_[i], side);
        }
      } catch (...) {
        cudaStreamEndCapture(side, &child);
        throw;
      }
      EAGLE_CUDA_CHECK(cudaStreamEndCapture(side, &child));
      std::size_t count = 0;
      EAGLE_CUDA_CHECK(cudaGraphGetNodes(child, nullptr, &count));
      cudaGraphNode_t only = nullptr;
      cudaGraphNodeType type = cudaGraphNodeTypeEmpty;
      if (count == 1) {
        EAGLE_CUDA_CHECK(cudaGraphGetNodes(child, &only, &count));
        EAGLE_CUDA_CHECK(cudaGraphNodeGetType(only, &type));
      }
      if (type == cudaGraphNodeTypeKernel) {
        cudaKernelNodeParams p{};
        EAGLE_CUDA_CHECK(cudaGraphKernelNodeGetParams(only, &p));
        EAGLE_CUDA_CHECK(cudaGraphAddKernelNode(&handles_[i], graph, deps.data(), deps.size(), &p));
      } else {
        EAGLE_CUDA_CHECK(
            cudaGraphAddChildGraphNode(&handles_[i], graph, deps.data(), deps.size(), child));
      }
    } catch (...) {
      if (child) cudaGraphDestroy(child);
      cudaStreamDestroy(side);
      throw;
    }
    cudaGraphDestroy(child);
    cudaStreamDestroy(side);
  }

  void release() {
    DeviceGuard guard(device_.ordinal());
    if (exec_) cudaGraphExecDestroy(exec_);
    if (graph_) cudaGraphDestroy(graph_);
    for (void* w : workspaces_)
      if (w) cudaFree(w);
    exec_ = nullptr;
    graph_ = nullptr;
    workspaces_.clear();
  }

  const Plan& plan_;
  const std::vector<PlannedNode>& nodes_;
  Device device_;
  const DeviceProperties& properties_;  // read once: kernel_params runs per patched node
  cudaStream_t stream_;
  bool plain_if_only_;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  std::vector<cudaGraphNode_t> handles_;  // per node: the node its dependents wait on
  std::vector<KernelArgs*> arg_pointers_;
  std::vector<void*> workspaces_;
  std::vector<ConditionArgs> conditions_;  // per control node: what its setters read
  std::vector<ConditionArgs*> condition_pointers_;
  std::vector<std::vector<cudaGraphNode_t>> setters_;  // per control node: kernels setting it
  int kernels_ = 0, copies_ = 0, captured_ = 0, conditionals_ = 0, forks_ = 0;
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
