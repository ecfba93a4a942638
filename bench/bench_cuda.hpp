// Shared by the GPU sections: owners of the raw peers' CUDA objects and device-array helpers.
// CUDA builds only.
#pragma once

#include <algorithm>
#include <limits>
#include <vector>

#include <cuda_runtime.h>

#include "bench_common.hpp"
#include "eagle/eagle.hpp"
#include "util/cuda_check.hpp"

namespace eagle::bench {

// Owning holders of the raw peers' CUDA objects, released on every path.
class RawStream {
 public:
  RawStream() { EAGLE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~RawStream() { cudaStreamDestroy(stream_); }
  RawStream(const RawStream&) = delete;
  RawStream& operator=(const RawStream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

class RawEvent {
 public:
  RawEvent() { EAGLE_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming)); }
  ~RawEvent() { cudaEventDestroy(event_); }
  RawEvent(const RawEvent&) = delete;
  RawEvent& operator=(const RawEvent&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

struct RawGraph {
  RawGraph() = default;
  RawGraph(const RawGraph&) = delete;
  RawGraph& operator=(const RawGraph&) = delete;
  ~RawGraph() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
  }
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
};

// Array::from and copy_from use plain cudaMemcpy, which need not be complete on return (device
// to device, or from pageable memory) and does not order against non-blocking streams: wait for
// the whole device before the benchmark's streams touch the data.
template <class T>
Array to_device(const std::vector<T>& values, Device dev) {
  Array a = Array::from(values, {static_cast<int64_t>(values.size())}, dev);
  EAGLE_CUDA_CHECK(cudaDeviceSynchronize());
  return a;
}

// Fills a device array with NaN (floating point) or all ones (integers), so an unwritten output
// shows (u32, bf16 and f32 arrays).
inline void poison(const Array& a) {
  if (a.dtype() == DType::u32) {
    a.copy_from(
        Array::from(std::vector<uint32_t>(a.numel(), 0xFFFFFFFFu), a.shape(), Device::cpu()));
  } else if (a.dtype() == DType::bf16) {
    a.copy_from(Array::from(
        std::vector<bfloat16>(a.numel(), bfloat16(std::numeric_limits<float>::quiet_NaN())),
        a.shape(), Device::cpu()));
  } else {
    a.copy_from(Array::from(std::vector<float>(a.numel(), std::numeric_limits<float>::quiet_NaN()),
                            a.shape(), Device::cpu()));
  }
  EAGLE_CUDA_CHECK(cudaDeviceSynchronize());
}

// Device nanoseconds per call of fn on `stream`: CUDA events around `reps` calls, median (and
// min) over the batches.
template <class Fn>
Stats device_time(const Options& o, cudaStream_t stream, int reps, Fn&& fn) {
  cudaEvent_t a, b;
  EAGLE_CUDA_CHECK(cudaEventCreate(&a));
  EAGLE_CUDA_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < 2; ++i) fn();
  std::vector<double> ns;
  const int batches = o.quick ? 5 : 15;
  for (int s = 0; s < batches; ++s) {
    EAGLE_CUDA_CHECK(cudaEventRecord(a, stream));
    for (int i = 0; i < reps; ++i) fn();
    EAGLE_CUDA_CHECK(cudaEventRecord(b, stream));
    EAGLE_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    EAGLE_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    ns.push_back(ms * 1e6 / reps);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(ns.begin(), ns.end());
  return {ns[ns.size() / 2], ns.front()};
}

}  // namespace eagle::bench
