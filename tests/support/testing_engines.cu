#include "testing_engines.hpp"

#include <cstring>
#include <memory>

#include "eagle/core/error.hpp"
#include "eagle/plan/operand_rules.hpp"

#ifdef __CUDACC__
#include <cuda_runtime.h>
#endif

namespace eagle::test {

EngineCounts& engine_counts() {
  static EngineCounts c;
  return c;
}

namespace {

void* make_handle(Device, void*) {
  ++engine_counts().handles_made;
  return &engine_counts();
}
void free_handle(void*) noexcept {
  ++engine_counts().handles_freed;
}
const Library kLibrary{"populating-test-library", &make_handle, &free_handle};
constexpr std::size_t kWorkspace = 512;

class PopulatingPlan final : public plan::CompiledPlan {
 public:
  PopulatingPlan(const op::Graph& graph, const plan::BuildContext& ctx, bool nesting)
      : nesting_(nesting) {
    op::Tensor in, out;
    for (const op::Tensor& t : graph.tensors()) {
      if (t.producer() < 0 && !in.defined()) in = t;
      if (t.producer() >= 0 && !out.defined()) out = t;
    }
    const Device device = ctx.target.value_or(Device::cpu());
    rules_.add(*ctx.layout, in, device, true);
    rules_.add(*ctx.layout, out, device, true);
    in_ = rules_.position_of(in);
    out_ = rules_.position_of(out);
    bytes_ = itemsize(in.dtype());
    for (int64_t d : in.dims()) bytes_ *= static_cast<std::size_t>(d);
  }
  const Library* library() const override { return &kLibrary; }
  std::size_t workspace_bytes() const override { return kWorkspace; }
  bool run(const plan::OperandBuffer* ops,
           const plan::ExecutionContext& ctx) const noexcept override {
    if (!rules_.match(ops)) return false;
    note(ctx);
    ++engine_counts().runs;
    if (ctx.device.is_cpu()) {
      std::memcpy(ops[out_].data, ops[in_].data, bytes_);
      return true;
    }
#ifdef __CUDACC__
    return cudaMemcpyAsync(ops[out_].data, ops[in_].data, bytes_, cudaMemcpyDeviceToDevice,
                           static_cast<cudaStream_t>(ctx.stream)) == cudaSuccess;
#else
    return false;
#endif
  }
  void explain(const plan::OperandBuffer* ops, const plan::ExecutionContext&) const override {
    rules_.explain(ops);
  }
#ifdef __CUDACC__
  bool populate_cuda_graph(const plan::OperandBuffer* ops, const plan::ExecutionContext& ctx,
                           void* graph) const override {
    note(ctx);
    ++engine_counts().populates;
    auto target = static_cast<cudaGraph_t>(graph);
    if (!nesting_) {
      cudaGraphNode_t node = nullptr;
      return cudaGraphAddMemcpyNode1D(&node, target, nullptr, 0, ops[out_].data, ops[in_].data,
                                      bytes_, cudaMemcpyDeviceToDevice) == cudaSuccess;
    }
    // A memset of the workspace's first half, a child graph holding the copy, a memset of the
    // second half, in a chain: the shape of the cuDNN engine's graphs (a kernel, cuDNN's own
    // graph as a child, a kernel).
    cudaGraph_t inner = nullptr;
    if (cudaGraphCreate(&inner, 0) != cudaSuccess) return false;
    cudaGraphNode_t first = nullptr, copy = nullptr, nested = nullptr, last = nullptr;
    cudaMemsetParams half{};
    half.dst = ctx.workspace;
    half.elementSize = 1;
    half.width = kWorkspace / 2;
    half.height = 1;
    bool ok = cudaGraphAddMemsetNode(&first, target, nullptr, 0, &half) == cudaSuccess &&
              cudaGraphAddMemcpyNode1D(&copy, inner, nullptr, 0, ops[out_].data, ops[in_].data,
                                       bytes_, cudaMemcpyDeviceToDevice) == cudaSuccess &&
              cudaGraphAddChildGraphNode(&nested, target, &first, 1, inner) == cudaSuccess;
    half.dst = static_cast<char*>(ctx.workspace) + kWorkspace / 2;
    ok = ok && cudaGraphAddMemsetNode(&last, target, &nested, 1, &half) == cudaSuccess;
    cudaGraphDestroy(inner);
    return ok;
  }
  bool update_cuda_graph(const plan::OperandBuffer* ops, const plan::ExecutionContext& ctx,
                         void* graph) const override {
    note(ctx);
    ++engine_counts().updates;
    if (nesting_) return false;  // not patched: the graph is made again
    std::size_t count = 1;
    cudaGraphNode_t node = nullptr;
    if (cudaGraphGetNodes(static_cast<cudaGraph_t>(graph), &node, &count) != cudaSuccess)
      return false;
    return cudaGraphMemcpyNodeSetParams1D(node, ops[out_].data, ops[in_].data, bytes_,
                                          cudaMemcpyDeviceToDevice) == cudaSuccess;
  }
#endif

 private:
  static void note(const plan::ExecutionContext& ctx) {
    if (ctx.handle == &engine_counts()) engine_counts().handle_seen = true;
    engine_counts().workspace_bytes_seen = static_cast<int>(ctx.workspace_bytes);
  }
  bool nesting_ = false;  // the copy inside a child graph of its own, between two memsets
  plan::OperandRules rules_;
  int in_ = -1, out_ = -1;
  std::size_t bytes_ = 0;
};

class PopulatingEngine final : public plan::Engine {
 public:
  // On the GPU from sm_80, or on the CPU (where populating a CUDA graph is never asked).
  PopulatingEngine(int64_t id, const std::string& name, DeviceKind device, bool nesting = false)
      : Engine(id, name), nesting_(nesting) {
    caps_.device = device;
    if (device == DeviceKind::cuda) {
      caps_.sm_lo = 80;
      caps_.sm_hi = 999;
    }
    caps_.dtypes = {DType::f32};
  }
  const plan::Capabilities& capabilities() const override { return caps_; }
  void check_support(const op::Graph& graph, const plan::Facts&,
                     const DeviceProperties&) const override {
    if (graph.nodes().size() != 1 || graph.nodes()[0].op() != "identity")
      throw NotSupported("populating test engine: serves one identity node");
  }
  std::shared_ptr<const plan::CompiledPlan> build_plan(
      const op::Graph& graph, const plan::Facts&, const plan::PlanConfig&,
      const plan::BuildContext& ctx) const override {
    return std::make_shared<PopulatingPlan>(graph, ctx, nesting_);
  }

 private:
  plan::Capabilities caps_;
  bool nesting_;
};

std::unique_ptr<plan::Engine> make_gpu(int64_t id, const std::string& name) {
  return std::make_unique<PopulatingEngine>(id, name, DeviceKind::cuda);
}
std::unique_ptr<plan::Engine> make_cpu(int64_t id, const std::string& name) {
  return std::make_unique<PopulatingEngine>(id, name, DeviceKind::cpu);
}
std::unique_ptr<plan::Engine> make_nesting_gpu(int64_t id, const std::string& name) {
  return std::make_unique<PopulatingEngine>(id, name, DeviceKind::cuda, true);
}

const plan::Manifest& manifest_of(const char* gpu_slot, plan::EngineFactory gpu) {
  plan::ManifestSpec spec;
  plan::EngineFamily f;
  f.name = "copy";
  f.block = 0;
  f.slots = {{gpu_slot, gpu, false}, {"populating_cpu", &make_cpu, false}};
  spec.families.push_back(f);
  spec.unanchored_family = "copy";
  return *new plan::Manifest(spec);  // one per kind, for the process
}

}  // namespace

const plan::Manifest& populating_manifest() {
  static const plan::Manifest& m = manifest_of("populating_gpu", &make_gpu);
  return m;
}

const plan::Manifest& nesting_populating_manifest() {
  static const plan::Manifest& m = manifest_of("populating_nested_gpu", &make_nesting_gpu);
  return m;
}

}  // namespace eagle::test
