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
  // A stream eagle does not own: another library's cudaStream_t on `device` (nullptr: the legacy
  // default stream), e.g. PyTorch's current stream, so eagle's work is ordered with the caller's.
  // eagle never destroys it; the caller keeps it alive while eagle uses it. On the CPU `native`
  // must be nullptr. Throws InvalidArgument for a CUDA device that is not attached.
  static Stream borrow(Device device, void* native);
  ~Stream();
  Stream(Stream&&) noexcept;
  Stream& operator=(Stream&&) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  Device device() const { return device_; }
  bool borrowed() const { return borrowed_; }
  // The cudaStream_t, or nullptr on the CPU (and for the borrowed legacy default stream).
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
  bool borrowed_ = false;
  std::unique_ptr<Cache> cache_;
};

}  // namespace eagle
