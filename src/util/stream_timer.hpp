// Internal: the time work issued on one stream takes. On a CUDA stream, device events around the
// work (the GPU's time, not the host's); on the CPU, where work runs when it is issued, the host
// clock.
#pragma once

#include <chrono>

#include "eagle/core/device.hpp"

namespace eagle::detail {

class StreamTimer {
 public:
  // `stream` is a cudaStream_t on a CUDA device, ignored on the CPU.
  StreamTimer(Device device, void* stream);
  ~StreamTimer();
  StreamTimer(const StreamTimer&) = delete;
  StreamTimer& operator=(const StreamTimer&) = delete;

  void start();
  // Milliseconds since start(); waits for the work issued in between.
  double stop_ms();

 private:
  // Unused in a build without CUDA, where only the host clock runs.
  [[maybe_unused]] Device device_;
  [[maybe_unused]] void* stream_;
  [[maybe_unused]] void* begin_ = nullptr;  // cudaEvent_t pair on CUDA devices
  [[maybe_unused]] void* end_ = nullptr;
  std::chrono::steady_clock::time_point host_begin_;
};

}  // namespace eagle::detail
