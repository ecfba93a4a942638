// The CUDA backend: the nodes become one CUDA graph (kernel nodes with eagle's argument block,
// memcpy nodes for param copies, child graphs captured from opaque sequences), instantiated once.
#include <string>

#include "eagle/core/error.hpp"
#include "eagle/core/stream.hpp"
#include "exec/executor.hpp"
#include "kernel/cuda_launch.hpp"
#include "util/cuda_check.hpp"

namespace eagle::detail {

#ifdef EAGLE_HAVE_CUDA

namespace {

class CudaGraphExecutor final : public Executor {
 public:
  CudaGraphExecutor(const std::vector<PlannedNode>& nodes, Device device, const Stream& stream)
      : nodes_(nodes),
        device_(device),
        properties_(cached_properties(device)),
        stream_(static_cast<cudaStream_t>(stream.native())) {
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
      if (nodes_[i].impl.cuda_capture) return false;
    for (int i : ids) {
      const PlannedNode& n = nodes_[i];
      if (n.is_copy) {
        EAGLE_CUDA_CHECK(cudaGraphExecMemcpyNodeSetParams1D(
            exec_, handles_[i], n.copy_dst, n.copy_src, n.copy_bytes, cudaMemcpyDeviceToDevice));
      } else {
        cudaKernelNodeParams p = kernel_params(n);
        EAGLE_CUDA_CHECK(cudaGraphExecKernelNodeSetParams(exec_, handles_[i], &p));
      }
    }
    return true;
  }

  std::string backend() const override { return "cuda-graph"; }
  std::string schedule() const override {
    return "CUDA graph on " + device_.str() + ": " + std::to_string(native_node_count()) +
           " nodes (" + std::to_string(kernels_) + " kernel, " + std::to_string(copies_) +
           " memcpy, " + std::to_string(captured_) + " captured child graphs)";
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
    p.kernelParams =
        const_cast<void**>(reinterpret_cast<void* const*>(&arg_pointers_[&n - nodes_.data()]));
    return p;
  }

  void construct() {
    EAGLE_CUDA_CHECK(cudaGraphCreate(&graph_, 0));
    handles_.resize(nodes_.size());
    arg_pointers_.resize(nodes_.size());
    workspaces_.resize(nodes_.size(), nullptr);
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      const PlannedNode& n = nodes_[i];
      arg_pointers_[i] = const_cast<KernelArgs*>(&n.args);
      std::vector<cudaGraphNode_t> deps;
      for (int d : n.deps) deps.push_back(handles_[d]);
      if (n.is_copy) {
        EAGLE_CUDA_CHECK(cudaGraphAddMemcpyNode1D(&handles_[i], graph_, deps.data(), deps.size(),
                                                  n.copy_dst, n.copy_src, n.copy_bytes,
                                                  cudaMemcpyDeviceToDevice));
        ++copies_;
      } else if (n.impl.cuda_function) {
        cudaKernelNodeParams p = kernel_params(n);
        EAGLE_CUDA_CHECK(
            cudaGraphAddKernelNode(&handles_[i], graph_, deps.data(), deps.size(), &p));
        ++kernels_;
      } else if (n.impl.cuda_capture) {
        add_captured(i, deps);
        ++captured_;
      } else {
        throw NotSupported("node " + std::to_string(i) + " '" + n.label +
                           "' has no CUDA implementation for its dtypes; build it on the CPU");
      }
    }
    EAGLE_CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_, 0));
  }

  // An opaque sequence (a library call) is captured on a side stream into its own graph, which
  // becomes a child graph node. Its workspace lives as long as the executor.
  void add_captured(std::size_t i, const std::vector<cudaGraphNode_t>& deps) {
    const PlannedNode& n = nodes_[i];
    const std::size_t ws = n.impl.cuda_workspace ? n.impl.cuda_workspace(n.args) : 0;
    if (ws > 0) EAGLE_CUDA_CHECK(cudaMalloc(&workspaces_[i], ws));
    cudaStream_t side = nullptr;
    EAGLE_CUDA_CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    cudaGraph_t child = nullptr;
    try {
      EAGLE_CUDA_CHECK(cudaStreamBeginCapture(side, cudaStreamCaptureModeThreadLocal));
      try {
        n.impl.cuda_capture(n.args, workspaces_[i], side);
      } catch (...) {
        cudaStreamEndCapture(side, &child);
        throw;
      }
      EAGLE_CUDA_CHECK(cudaStreamEndCapture(side, &child));
      EAGLE_CUDA_CHECK(
          cudaGraphAddChildGraphNode(&handles_[i], graph_, deps.data(), deps.size(), child));
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

  const std::vector<PlannedNode>& nodes_;
  Device device_;
  const DeviceProperties& properties_;  // read once: kernel_params runs per patched node
  cudaStream_t stream_;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  std::vector<cudaGraphNode_t> handles_;
  std::vector<KernelArgs*> arg_pointers_;
  std::vector<void*> workspaces_;
  int kernels_ = 0, copies_ = 0, captured_ = 0;
};

}  // namespace

std::unique_ptr<Executor> make_cuda_executor(const std::vector<PlannedNode>& nodes, Device device,
                                             const Stream& stream) {
  return std::make_unique<CudaGraphExecutor>(nodes, device, stream);
}

#else

std::unique_ptr<Executor> make_cuda_executor(const std::vector<PlannedNode>&, Device,
                                             const Stream&) {
  throw NotSupported("this build of eagle has no CUDA support");
}

#endif

}  // namespace eagle::detail
