#include <cuda_runtime.h>

#include "engines/native/launch_status.hpp"

namespace eagle::native {

namespace {
thread_local cudaError_t last_error = cudaSuccess;
}

bool launch_succeeded() noexcept {
  last_error = cudaGetLastError();
  return last_error == cudaSuccess;
}

const char* structured_launch_error() noexcept {
  return cudaGetErrorString(last_error);
}

}  // namespace eagle::native
