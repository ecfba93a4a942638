#include "testing_calls.hpp"

#include <algorithm>
#include <cstring>

#include "eagle/core/error.hpp"

#ifdef __CUDACC__
#include <cuda_runtime.h>
#endif

namespace eagle::test {

namespace {

void* make_handle(Device, void*);
void free_handle(void*) noexcept;

// The library's handle is the counts it reports to.
const Library kTestLibrary{"test-library", &make_handle, &free_handle};
thread_local CallCounts* g_counts_for_create = nullptr;

void* make_handle(Device, void*) {
  ++g_counts_for_create->handles_made;
  return g_counts_for_create;
}
void free_handle(void* h) noexcept {
  ++static_cast<CallCounts*>(h)->handles_freed;
}

class CopyCall final : public Call {
 public:
  CopyCall(CopyEntry entry, std::shared_ptr<CallCounts> counts)
      : entry_(entry), counts_(std::move(counts)) {}

  const Library* library() const override {
    g_counts_for_create = counts_.get();  // so the handle made next reports to these counts
    return &kTestLibrary;
  }
  std::size_t workspace_bytes(const ArgBlock&, Device) const override { return 256; }

  void run(const ArgBlock& args, const CallContext& ctx) const override {
    ++counts_->runs;
    note(ctx);
    const ArrayArg &x = args.array(0), &out = args.array(1);
    const std::size_t bytes = static_cast<std::size_t>(x.numel) * 4;
    if (ctx.device.is_cpu()) {
      std::memcpy(ctx.workspace, x.data, std::min<std::size_t>(bytes, ctx.workspace_bytes));
      std::memcpy(out.data, x.data, bytes);
      if (entry_ == CopyEntry::populate_memsets)
        apply_copy_call_memsets(static_cast<unsigned char*>(out.data));
      return;
    }
    if (entry_ == CopyEntry::populate_memsets)
      throw NotSupported("copy_u32 (populate_memsets): only as its own graph on a GPU");
#ifdef __CUDACC__
    const auto stream = static_cast<cudaStream_t>(ctx.stream);
    // Touch the whole workspace, so a wrong size shows under memcheck.
    if (cudaMemsetAsync(ctx.workspace, 0, ctx.workspace_bytes, stream) != cudaSuccess ||
        cudaMemcpyAsync(out.data, x.data, bytes, cudaMemcpyDeviceToDevice, stream) != cudaSuccess)
      throw CudaError("copy_u32: a copy failed");
#else
    throw NotSupported("copy_u32: this test build has no CUDA");
#endif
  }

#ifdef __CUDACC__
  bool populate_cuda_graph(const ArgBlock& args, const CallContext& ctx,
                           void* graph) const override {
    if (entry_ == CopyEntry::capture) return false;
    ++counts_->populates;
    note(ctx);
    const int nodes = entry_ == CopyEntry::populate_reshaped ? counts_->populates.load() : 1;
    cudaGraphNode_t prev = nullptr;
    const ArrayArg &x = args.array(0), &out = args.array(1);
    for (int k = 0; k < nodes; ++k) {
      cudaGraphNode_t node = nullptr;
      if (cudaGraphAddMemcpyNode1D(&node, static_cast<cudaGraph_t>(graph), prev ? &prev : nullptr,
                                   prev ? 1 : 0, out.data, x.data,
                                   static_cast<std::size_t>(x.numel) * 4,
                                   cudaMemcpyDeviceToDevice) != cudaSuccess)
        throw CudaError("copy_u32: cudaGraphAddMemcpyNode1D failed");
      prev = node;
    }
    if (entry_ != CopyEntry::populate_memsets) return true;
    for (const OutputMemset& m : copy_call_memsets()) {
      cudaGraphNode_t node = nullptr;
      const cudaMemsetParams p = memset_params(m, out.data);
      if (cudaGraphAddMemsetNode(&node, static_cast<cudaGraph_t>(graph), &prev, 1, &p) !=
          cudaSuccess)
        throw CudaError("copy_u32: cudaGraphAddMemsetNode failed");
      prev = node;
    }
    return true;
  }
  bool update_cuda_graph(const ArgBlock& args, const CallContext& ctx, void* graph) const override {
    if (entry_ != CopyEntry::populate && entry_ != CopyEntry::populate_memsets) return false;
    ++counts_->updates;
    note(ctx);
    // The nodes in the order populate added them: the copy, then the memsets.
    const std::vector<OutputMemset>& memsets = copy_call_memsets();
    std::size_t count = entry_ == CopyEntry::populate ? 1 : 1 + memsets.size();
    std::vector<cudaGraphNode_t> nodes(count);
    if (cudaGraphGetNodes(static_cast<cudaGraph_t>(graph), nodes.data(), &count) != cudaSuccess ||
        count != nodes.size())
      return false;
    const ArrayArg &x = args.array(0), &out = args.array(1);
    if (cudaGraphMemcpyNodeSetParams1D(nodes[0], out.data, x.data,
                                       static_cast<std::size_t>(x.numel) * 4,
                                       cudaMemcpyDeviceToDevice) != cudaSuccess)
      return false;
    for (std::size_t k = 1; k < count; ++k) {
      const cudaMemsetParams p = memset_params(memsets[k - 1], out.data);
      if (cudaGraphMemsetNodeSetParams(nodes[k], &p) != cudaSuccess) return false;
    }
    return true;
  }

  static cudaMemsetParams memset_params(const OutputMemset& m, void* out) {
    cudaMemsetParams p{};
    p.dst = static_cast<char*>(out) + m.offset;
    p.pitch = m.pitch;
    p.value = m.value;
    p.elementSize = m.element_bytes;
    p.width = m.width;
    p.height = m.height;
    return p;
  }
#endif

 private:
  void note(const CallContext& ctx) const {
    if (ctx.handle == counts_.get()) counts_->handle_seen = true;
    counts_->last_workspace_bytes = static_cast<int>(ctx.workspace_bytes);
    counts_->last_workspace = ctx.workspace;
  }

  CopyEntry entry_;
  std::shared_ptr<CallCounts> counts_;
};

class CopyBinder final : public CallBinder {
 public:
  explicit CopyBinder(std::shared_ptr<const Call> call) : call_(std::move(call)) {}
  std::shared_ptr<const Call> bind(Device) const override { return call_; }

 private:
  std::shared_ptr<const Call> call_;
};

}  // namespace

const std::vector<OutputMemset>& copy_call_memsets() {
  static const std::vector<OutputMemset> memsets = {
      {6, 400, 37, 9, 0xBEEFu, 2},        // 2-byte elements from an unaligned start, 9 rows
      {1, 0, 3001, 1, 0x7Fu, 1},          // one long row of bytes: head, 16-byte body, tail
      {3600, 0, 100, 1, 0xDEADBEEFu, 4},  // the last 400 bytes, 4-byte elements
      {20, 1000, 3, 3, 0x12345678u, 4},   // short rows: no 16-byte chunk at all
  };
  return memsets;
}

void apply_copy_call_memsets(unsigned char* bytes) {
  for (const OutputMemset& m : copy_call_memsets())
    for (std::size_t row = 0; row < m.height; ++row)
      for (std::size_t k = 0; k < m.width * m.element_bytes; ++k)
        bytes[m.offset + row * m.pitch + k] =
            static_cast<unsigned char>(m.value >> (8 * (k % m.element_bytes)));
}

int memset_node_count(void* graph) {
#ifdef __CUDACC__
  std::size_t count = 0;
  if (cudaGraphGetNodes(static_cast<cudaGraph_t>(graph), nullptr, &count) != cudaSuccess)
    throw CudaError("memset_node_count: cudaGraphGetNodes failed");
  std::vector<cudaGraphNode_t> nodes(count);
  if (cudaGraphGetNodes(static_cast<cudaGraph_t>(graph), nodes.data(), &count) != cudaSuccess)
    throw CudaError("memset_node_count: cudaGraphGetNodes failed");
  int memsets = 0;
  for (cudaGraphNode_t node : nodes) {
    cudaGraphNodeType type = cudaGraphNodeTypeEmpty;
    if (cudaGraphNodeGetType(node, &type) != cudaSuccess)
      throw CudaError("memset_node_count: cudaGraphNodeGetType failed");
    if (type == cudaGraphNodeTypeMemset) ++memsets;
    cudaGraph_t inner = nullptr;
    if (type == cudaGraphNodeTypeGraph &&
        cudaGraphChildGraphNodeGetGraph(node, &inner) == cudaSuccess)
      memsets += memset_node_count(inner);
  }
  return memsets;
#else
  (void)graph;
  return -1;
#endif
}

int root_node_count(void* graph) {
#ifdef __CUDACC__
  std::size_t count = 0;
  if (cudaGraphGetRootNodes(static_cast<cudaGraph_t>(graph), nullptr, &count) != cudaSuccess)
    throw CudaError("root_node_count: cudaGraphGetRootNodes failed");
  return static_cast<int>(count);
#else
  (void)graph;
  return -1;
#endif
}

Kernel copy_call_kernel(CopyEntry entry, std::shared_ptr<CallCounts> counts) {
  KernelDef def;
  def.name = "copy_u32";
  def.arrays = {{"x", Access::read}, {"out", Access::write}};
  def.per_sample = false;
  def.infer = [](const std::vector<ArrayMeta>& in, const std::vector<ScalarArg>&) {
    if (in[0].dtype != DType::u32) throw InvalidArgument("copy_u32: argument 'x' must be u32");
    return std::vector<ArrayMeta>{in[0]};
  };
  def.binder = std::make_shared<CopyBinder>(std::make_shared<CopyCall>(entry, std::move(counts)));
  return Kernel(std::move(def));
}

}  // namespace eagle::test
