#include "kernel/cuda_launch.hpp"

#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

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

const void* resolve_kernel(const CudaFunction& function, const std::string& kernel) {
  // A fact of the loaded program, fixed once known: resolved once per function.
  static std::shared_mutex mutex;
  static std::unordered_map<const void*, const void*> handles;
  {
    std::shared_lock<std::shared_mutex> lock(mutex);
    auto it = handles.find(function.stub);
    if (it != handles.end()) return it->second;
  }
  const void* handle = function.resolve ? function.resolve(function.stub) : nullptr;
  if (!handle)
    throw CudaError("kernel " + kernel +
                    ": the CUDA runtime of the program that compiled its CUDA function does not "
                    "know it (cudaGetKernel failed); is the function a __global__ taking "
                    "eagle::KernelArgsN, handed over with eagle::cuda_function?");
  std::unique_lock<std::shared_mutex> lock(mutex);
  handles.emplace(function.stub, handle);
  return handle;
}

void launch_kernel(const CudaLaunch& launch, const ArgBlock& args, Device device, void* stream) {
#ifdef EAGLE_HAVE_CUDA
  DeviceGuard guard(device.ordinal());
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(launch.shape.grid[0], launch.shape.grid[1], launch.shape.grid[2]);
  config.blockDim = dim3(launch.shape.block[0], launch.shape.block[1], launch.shape.block[2]);
  config.dynamicSmemBytes = launch.shape.shared_bytes;
  config.stream = static_cast<cudaStream_t>(stream);
  void* params[] = {const_cast<void*>(args.data())};
  EAGLE_CUDA_CHECK(cudaLaunchKernelExC(&config, launch.kernel, params));
#else
  (void)launch, (void)args, (void)device, (void)stream;
  throw NotSupported("this build of eagle has no CUDA support");
#endif
}

}  // namespace eagle::detail
