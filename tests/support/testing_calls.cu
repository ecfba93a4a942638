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
      return;
    }
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
    for (int k = 0; k < nodes; ++k) {
      cudaGraphNode_t node = nullptr;
      const ArrayArg &x = args.array(0), &out = args.array(1);
      if (cudaGraphAddMemcpyNode1D(&node, static_cast<cudaGraph_t>(graph), prev ? &prev : nullptr,
                                   prev ? 1 : 0, out.data, x.data,
                                   static_cast<std::size_t>(x.numel) * 4,
                                   cudaMemcpyDeviceToDevice) != cudaSuccess)
        throw CudaError("copy_u32: cudaGraphAddMemcpyNode1D failed");
      prev = node;
    }
    return true;
  }
  bool update_cuda_graph(const ArgBlock& args, const CallContext& ctx, void* graph) const override {
    if (entry_ != CopyEntry::populate) return false;
    ++counts_->updates;
    note(ctx);
    std::size_t count = 1;
    cudaGraphNode_t node = nullptr;
    if (cudaGraphGetNodes(static_cast<cudaGraph_t>(graph), &node, &count) != cudaSuccess)
      return false;
    const ArrayArg &x = args.array(0), &out = args.array(1);
    return cudaGraphMemcpyNodeSetParams1D(node, out.data, x.data,
                                          static_cast<std::size_t>(x.numel) * 4,
                                          cudaMemcpyDeviceToDevice) == cudaSuccess;
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
