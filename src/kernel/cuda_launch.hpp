// Internal: issuing a kernel implementation on a CUDA stream, and cached device properties.
#pragma once

#include "eagle/core/device.hpp"
#include "eagle/kernel/kernel.hpp"

namespace eagle::detail {

// Properties of an attached device, queried once per device (cudaGetDeviceProperties is slow).
const DeviceProperties& cached_properties(Device device);

// Issues impl on `stream` (a cudaStream_t) of `device`: cudaLaunchKernelEx for a kernel function,
// or the captured sequence with `workspace` (at least impl.cuda_workspace(args) bytes).
void cuda_issue(const KernelImpl& impl, const KernelArgs& args, Device device, void* stream,
                void* workspace);

}  // namespace eagle::detail
