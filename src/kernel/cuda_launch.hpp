// Internal: issuing CUDA kernels of any program (through their cudaKernel_t handles), and cached
// device properties.
#pragma once

#include "eagle/core/device.hpp"
#include "eagle/kernel/kernel.hpp"

namespace eagle::detail {

// Properties of an attached device, queried once per device (cudaGetDeviceProperties is slow).
const DeviceProperties& cached_properties(Device device);

// The launchable handle of a CUDA function (resolved once, then cached). Throws CudaError naming
// `kernel` when the program's runtime does not know the function.
const void* resolve_kernel(const CudaFunction& function, const std::string& kernel);

// Issues `launch` with `args` as the kernel's one parameter on `stream` (a cudaStream_t).
void launch_kernel(const CudaLaunch& launch, const ArgBlock& args, Device device, void* stream);

}  // namespace eagle::detail
