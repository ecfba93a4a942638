// Internal: CUDA return-code checking and a scoped device selection. Only in CUDA builds.
#pragma once

#ifdef EAGLE_HAVE_CUDA
#include <cuda_runtime.h>

#include <string>

#include "eagle/core/error.hpp"

namespace eagle::detail {

[[noreturn]] inline void throw_cuda(cudaError_t err, const char* what, const char* file, int line) {
  throw CudaError(std::string(what) + " failed: " + cudaGetErrorName(err) + " (" +
                  cudaGetErrorString(err) + ") at " + file + ":" + std::to_string(line));
}

// The runtime API keeps a per-thread current device; eagle sets it around each call and
// restores it, so nothing depends on (or leaks into) the caller's choice.
class DeviceGuard {
 public:
  explicit DeviceGuard(int ordinal) {
    cudaGetDevice(&previous_);
    if (previous_ != ordinal) cudaSetDevice(ordinal);
    changed_ = previous_ != ordinal;
  }
  ~DeviceGuard() {
    if (changed_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
  bool changed_ = false;
};

}  // namespace eagle::detail

#define EAGLE_CUDA_CHECK(call)                                            \
  do {                                                                    \
    cudaError_t eagle_err_ = (call);                                      \
    if (eagle_err_ != cudaSuccess)                                        \
      ::eagle::detail::throw_cuda(eagle_err_, #call, __FILE__, __LINE__); \
  } while (0)
#endif
