// A library routine brought into eagle through the Call interface, as a vendor integration
// (cuBLAS, cuDNN, NCCL) would be: a handle per stream, a workspace, run() on the caller's stream.
// Shows: Call (library, workspace_bytes, run), Library, CallBinder, a KernelDef with a binder.
// The "library" here is a staged copy (x -> workspace -> out) standing in for a vendor call.
// Pitfalls: everything run() needs comes from the CallContext (stream, handle, workspace): eagle
// owns them, so a recorded graph can capture the call and bind() can capture it again.
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "eagle/eagle.hpp"

#ifdef __CUDACC__
#include <cuda_runtime.h>
#endif

using namespace eagle;

struct VendorHandle {
  int calls = 0;
};
// [readme:call]
const Library kVendor{"vendor", [](Device, void* /*stream*/) -> void* { return new VendorHandle; },
                      [](void* h) noexcept { delete static_cast<VendorHandle*>(h); }};

class StagedCopy final : public Call {
 public:
  const Library* library() const override { return &kVendor; }  // ctx.handle is one of these
  std::size_t workspace_bytes(const ArgBlock& args, Device) const override {
    return static_cast<std::size_t>(args.array(0).numel) * sizeof(float);
  }
  void run(const ArgBlock& args, const CallContext& ctx) const override {
    ++static_cast<VendorHandle*>(ctx.handle)->calls;
    const ArrayArg &x = args.array(0), &out = args.array(1);
    const std::size_t bytes = static_cast<std::size_t>(x.numel) * sizeof(float);
    if (ctx.device.is_cpu()) {
      std::memcpy(ctx.workspace, x.data, bytes);
      std::memcpy(out.data, ctx.workspace, bytes);
      return;
    }
#ifdef __CUDACC__
    const auto stream = static_cast<cudaStream_t>(ctx.stream);  // issue on it, never sync
    if (cudaMemcpyAsync(ctx.workspace, x.data, bytes, cudaMemcpyDeviceToDevice, stream) ||
        cudaMemcpyAsync(out.data, ctx.workspace, bytes, cudaMemcpyDeviceToDevice, stream))
      throw CudaError("staged_copy: cudaMemcpyAsync failed");
#endif
  }
};

// Hands eagle the Call for a device when a graph holding the kernel is built (or launched).
class StagedCopyBinder final : public CallBinder {
 public:
  std::shared_ptr<const Call> bind(Device) const override { return std::make_shared<StagedCopy>(); }
};

const Kernel& staged_copy() {
  static const Kernel k([] {
    KernelDef d;
    d.name = "staged_copy";
    d.arrays = {{"x", Access::read}, {"out", Access::write}};
    d.infer = [](const std::vector<ArrayMeta>& in, const std::vector<ScalarArg>&) {
      if (in[0].dtype != DType::f32) throw InvalidArgument("staged_copy: 'x' must be f32");
      return std::vector<ArrayMeta>{in[0]};
    };
    d.binder = std::make_shared<StagedCopyBinder>();
    return d;
  }());
  return k;
}
// [/readme]

bool run(Device device) {
  Array x0 = Array::from(std::vector<float>{1, 2, 3}, {3}, device);
  Array x1 = Array::from(std::vector<float>{7, 8, 9}, {3}, device);
  Graph g = Graph::record([&](Recorder& r) {
    r.result(r.call(kernels::scale(), {r.call(staged_copy(), {r.param("x", x0)}), 2.0}));
  });
  g.build(device);  // on a GPU run() is stream-captured into the graph once
  const bool first = g()[0].to_vector<float>() == std::vector<float>{2, 4, 6};
  g.bind("x", x1);  // captured again with the new array, inside the same instantiated graph
  const bool second = g()[0].to_vector<float>() == std::vector<float>{14, 16, 18};
  std::printf("%s: rebuilds %d\n", device.str().c_str(), g.rebuild_count());
  return first && second && g.rebuild_count() == 0;
}

int main() {
  for (Device device : {Device::cpu(), Device::cuda(0)}) {
    if (device.is_cuda() && !cuda_available()) continue;
    if (!run(device)) {
      std::printf("library_call: wrong result on %s\n", device.str().c_str());
      return 1;
    }
  }
  return 0;
}
