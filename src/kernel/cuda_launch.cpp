#include "kernel/cuda_launch.hpp"

#include <map>
#include <memory>
#include <mutex>

#include "eagle/core/error.hpp"
#include "util/cuda_check.hpp"

namespace eagle::detail {

const DeviceProperties& cached_properties(Device device) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<DeviceProperties>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = cache[device.str()];
  if (!slot) slot = std::make_unique<DeviceProperties>(DeviceProperties::query(device));
  return *slot;
}

void cuda_issue(const KernelImpl& impl, const KernelArgs& args, Device device, void* stream,
                void* workspace) {
#ifdef EAGLE_HAVE_CUDA
  DeviceGuard guard(device.ordinal());
  if (impl.cuda_capture) {
    impl.cuda_capture(args, workspace, stream);
    return;
  }
  const CudaLaunchShape shape = impl.cuda_shape(args, cached_properties(device));
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(shape.grid[0], shape.grid[1], shape.grid[2]);
  config.blockDim = dim3(shape.block[0], shape.block[1], shape.block[2]);
  config.dynamicSmemBytes = shape.shared_bytes;
  config.stream = static_cast<cudaStream_t>(stream);
  void* params[] = {const_cast<KernelArgs*>(&args)};
  EAGLE_CUDA_CHECK(cudaLaunchKernelExC(&config, impl.cuda_function, params));
#else
  (void)impl, (void)args, (void)device, (void)stream, (void)workspace;
  throw NotSupported("this build of eagle has no CUDA support");
#endif
}

}  // namespace eagle::detail
