// Internal: the Call of an ordinary kernel (its CPU function, its CUDA function, or its captured
// sequence), constructible in place for the eager launch path.
#pragma once

#include <string>

#include "eagle/kernel/kernel.hpp"

namespace eagle {

class KernelCall final : public Call {
 public:
  KernelCall(const KernelImpl& impl, std::string name);
  std::size_t workspace_bytes(const ArgBlock& args, Device device) const override;
  void run(const ArgBlock& args, const CallContext& ctx) const override;
  bool cuda_kernel(const ArgBlock& args, const DeviceProperties& device,
                   CudaLaunch& out) const override;
  const KernelImpl& impl() const { return impl_; }

 private:
  KernelImpl impl_;
  std::string name_;
};

}  // namespace eagle
