#include <algorithm>

#include "eagle/kernel/cuda_function.hpp"
#include "kernel/tape_impl.hpp"

namespace eagle::detail {

namespace {

template <bool to_tape, class Word>
__global__ void tape_kernel(const KernelArgsN<3, 0> a) {
  const int64_t begin = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  tape_copy<Word>(a, to_tape ? kTapeWrite : kTapeRead, begin, step);
}

template <bool to_tape>
CudaFunction of_size(std::size_t bytes) {
  switch (bytes) {
    case 1:
      return cuda_function(&tape_kernel<to_tape, uint8_t>);
    case 2:
      return cuda_function(&tape_kernel<to_tape, uint16_t>);
    case 4:
      return cuda_function(&tape_kernel<to_tape, uint32_t>);
    case 8:
      return cuda_function(&tape_kernel<to_tape, uint64_t>);
    default:
      return {};
  }
}

}  // namespace

CudaFunction tape_cuda_function(bool to_tape, std::size_t bytes) {
  return to_tape ? of_size<true>(bytes) : of_size<false>(bytes);
}

CudaLaunchShape tape_cuda_shape(const KernelArgs& a, const DeviceProperties& device) {
  constexpr unsigned kThreads = 256;
  // The row is the smaller of the two non-index arrays (src or out): size the grid by it.
  const int64_t row = std::min(a.arrays[0].numel, a.arrays[2].numel);
  const int64_t wanted = (row + kThreads - 1) / kThreads;
  const int64_t cap = std::max(1, device.multiprocessors) * 16;
  CudaLaunchShape s;
  s.grid[0] = static_cast<unsigned>(std::max<int64_t>(1, std::min(wanted, cap)));
  s.block[0] = kThreads;
  return s;
}

}  // namespace eagle::detail
