// An ordered queue of work on one device. On the CPU work runs when it is issued.
#pragma once

#include <functional>
#include <memory>

#include "eagle/core/device.hpp"

namespace eagle {

class Stream {
 public:
  // A new stream on the device (a non-blocking cudaStream_t on CUDA devices).
  explicit Stream(Device device);
  ~Stream();
  Stream(Stream&&) noexcept;
  Stream& operator=(Stream&&) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  Device device() const { return device_; }
  // The cudaStream_t, or nullptr on the CPU.
  void* native() const { return handle_; }
  // Waits until all work issued on the stream has finished.
  void synchronize() const;

  // State another layer keeps per stream (a library handle bound to it): made by `make` the
  // first time `key` is asked for, destroyed with the stream. Thread-safe.
  std::shared_ptr<void> cached(const void* key,
                               const std::function<std::shared_ptr<void>()>& make) const;

 private:
  struct Cache;
  Device device_;
  void* handle_ = nullptr;
  std::unique_ptr<Cache> cache_;
};

}  // namespace eagle
