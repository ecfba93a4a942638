#include "eagle/core/stream.hpp"

#include <map>
#include <mutex>
#include <utility>

#include "eagle/core/error.hpp"
#include "util/cuda_check.hpp"

namespace eagle {

struct Stream::Cache {
  std::mutex mutex;
  std::map<const void*, std::shared_ptr<void>> entries;
};

Stream::Stream(Device device) : device_(device), cache_(std::make_unique<Cache>()) {
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

Stream Stream::borrow(Device device, void* native) {
  if (device.is_cpu()) {
    if (native != nullptr)
      throw InvalidArgument("Stream::borrow: a CPU stream has no native handle (pass nullptr)");
    return Stream(device);
  }
  if (device.ordinal() >= cuda_device_count())
    throw InvalidArgument("Stream::borrow: device " + device.str() + " is not attached");
  Stream s(Device::cpu());
  s.device_ = device;
  s.handle_ = native;
  s.borrowed_ = true;
  return s;
}

Stream::~Stream() {
  // What was cached for the stream (library handles bound to it) goes before the stream.
  cache_.reset();
#ifdef EAGLE_HAVE_CUDA
  if (handle_ && !borrowed_) {
    detail::DeviceGuard guard(device_.ordinal());
    cudaStreamDestroy(static_cast<cudaStream_t>(handle_));
  }
#endif
}

Stream::Stream(Stream&& o) noexcept
    : device_(o.device_),
      handle_(std::exchange(o.handle_, nullptr)),
      borrowed_(std::exchange(o.borrowed_, false)),
      cache_(std::move(o.cache_)) {}

Stream& Stream::operator=(Stream&& o) noexcept {
  if (this != &o) {
    Stream dead(std::move(*this));
    device_ = o.device_;
    handle_ = std::exchange(o.handle_, nullptr);
    borrowed_ = std::exchange(o.borrowed_, false);
    cache_ = std::move(o.cache_);
  }
  return *this;
}

void Stream::synchronize() const {
#ifdef EAGLE_HAVE_CUDA
  if (handle_ || borrowed_) {  // a borrowed nullptr is the legacy default stream
    detail::DeviceGuard guard(device_.ordinal());
    EAGLE_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(handle_)));
  }
#endif
}

std::shared_ptr<void> Stream::cached(const void* key,
                                     const std::function<std::shared_ptr<void>()>& make) const {
  if (!cache_) throw InvalidArgument("Stream::cached: the stream was moved from");
  std::lock_guard<std::mutex> lock(cache_->mutex);
  auto& slot = cache_->entries[key];
  if (!slot) slot = make();
  return slot;
}

}  // namespace eagle
