#include "util/stream_timer.hpp"

#include "eagle/core/error.hpp"
#include "util/cuda_check.hpp"

namespace eagle::detail {

StreamTimer::StreamTimer(Device device, void* stream) : device_(device), stream_(stream) {
  if (device.is_cpu()) return;
#ifdef EAGLE_HAVE_CUDA
  DeviceGuard guard(device.ordinal());
  cudaEvent_t b = nullptr, e = nullptr;
  EAGLE_CUDA_CHECK(cudaEventCreate(&b));
  if (const cudaError_t err = cudaEventCreate(&e); err != cudaSuccess) {
    cudaEventDestroy(b);
    throw_cuda(err, "cudaEventCreate", __FILE__, __LINE__);
  }
  begin_ = b;
  end_ = e;
#else
  throw NotSupported("StreamTimer: " + device.str() + " needs a build with CUDA");
#endif
}

StreamTimer::~StreamTimer() {
#ifdef EAGLE_HAVE_CUDA
  if (begin_) {
    DeviceGuard guard(device_.ordinal());
    cudaEventDestroy(static_cast<cudaEvent_t>(begin_));
    cudaEventDestroy(static_cast<cudaEvent_t>(end_));
  }
#endif
}

void StreamTimer::start() {
#ifdef EAGLE_HAVE_CUDA
  if (begin_) {
    DeviceGuard guard(device_.ordinal());
    EAGLE_CUDA_CHECK(
        cudaEventRecord(static_cast<cudaEvent_t>(begin_), static_cast<cudaStream_t>(stream_)));
    return;
  }
#endif
  host_begin_ = std::chrono::steady_clock::now();
}

double StreamTimer::stop_ms() {
#ifdef EAGLE_HAVE_CUDA
  if (begin_) {
    DeviceGuard guard(device_.ordinal());
    const auto e = static_cast<cudaEvent_t>(end_);
    EAGLE_CUDA_CHECK(cudaEventRecord(e, static_cast<cudaStream_t>(stream_)));
    EAGLE_CUDA_CHECK(cudaEventSynchronize(e));
    float ms = 0;
    EAGLE_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(begin_), e));
    return ms;
  }
#endif
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - host_begin_)
      .count();
}

}  // namespace eagle::detail
