#include "eagle/core/stream.hpp"

#include <utility>

#include "eagle/core/error.hpp"
#include "util/cuda_check.hpp"

namespace eagle {

Stream::Stream(Device device) : device_(device) {
  if (device.is_cpu()) return;
  if (device.ordinal() >= cuda_device_count())
    throw InvalidArgument("Stream: device " + device.str() + " is not attached");
#ifdef EAGLE_HAVE_CUDA
  detail::DeviceGuard guard(device.ordinal());
  cudaStream_t s = nullptr;
  EAGLE_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  handle_ = s;
#endif
}

Stream::~Stream() {
#ifdef EAGLE_HAVE_CUDA
  if (handle_) {
    detail::DeviceGuard guard(device_.ordinal());
    cudaStreamDestroy(static_cast<cudaStream_t>(handle_));
  }
#endif
}

Stream::Stream(Stream&& o) noexcept
    : device_(o.device_), handle_(std::exchange(o.handle_, nullptr)) {}

Stream& Stream::operator=(Stream&& o) noexcept {
  if (this != &o) {
    Stream dead(std::move(*this));
    device_ = o.device_;
    handle_ = std::exchange(o.handle_, nullptr);
  }
  return *this;
}

void Stream::synchronize() const {
#ifdef EAGLE_HAVE_CUDA
  if (handle_) {
    detail::DeviceGuard guard(device_.ordinal());
    EAGLE_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(handle_)));
  }
#endif
}

}  // namespace eagle
