// The Call of an ordinary kernel: its CPU function, its CUDA function (one kernel node in a
// graph) or its captured sequence (a library call, stream-captured).
#include "kernel/kernel_call.hpp"
#include "eagle/core/error.hpp"
#include "eagle/core/stream.hpp"
#include "eagle/kernel/kernel.hpp"
#include "eagle/kernel/thread_team.hpp"
#include "kernel/cuda_launch.hpp"

namespace eagle {

KernelCall::KernelCall(const KernelImpl& impl, std::string name)
    : impl_(impl), name_(std::move(name)) {}

std::size_t KernelCall::workspace_bytes(const ArgBlock& args, Device device) const {
  return device.is_cuda() && impl_.cuda_capture && impl_.cuda_workspace
             ? impl_.cuda_workspace(args.view())
             : 0;
}

void KernelCall::run(const ArgBlock& args, const CallContext& ctx) const {
  if (ctx.device.is_cpu()) {
    if (!impl_.cpu)
      throw NotSupported("kernel " + name_ + " has no CPU implementation for its dtypes");
    impl_.cpu(args.view(), ctx.team ? *ctx.team : ThreadTeam::serial());
    return;
  }
  if (impl_.cuda_capture) {
    impl_.cuda_capture(args.view(), ctx.workspace, ctx.stream);
    return;
  }
  CudaLaunch launch;
  if (!cuda_kernel(args, detail::cached_properties(ctx.device), launch))
    throw NotSupported("kernel " + name_ + " has no CUDA implementation for its dtypes");
  detail::launch_kernel(launch, args, ctx.device, ctx.stream);
}

bool KernelCall::cuda_kernel(const ArgBlock& args, const DeviceProperties& device,
                             CudaLaunch& out) const {
  if (!impl_.cuda_function) return false;
  out.kernel = detail::resolve_kernel(impl_.cuda_function, name_);
  out.shape = impl_.cuda_shape(args.view(), device);
  return true;
}

std::shared_ptr<const Call> make_kernel_call(const KernelImpl& impl, const std::string& name) {
  return std::make_shared<KernelCall>(impl, name);
}

CallContext CallContext::on(const Stream& stream, const ThreadTeam* team) {
  CallContext ctx;
  ctx.stream = stream.native();
  ctx.team = team;
  ctx.device = stream.device();
  return ctx;
}

}  // namespace eagle
