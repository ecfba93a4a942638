// The kernel a memset node becomes (exec/cuda/memset_nodes.hpp): 16-byte stores over each row's
// aligned body, single bytes over its unaligned head and tail.
#include <algorithm>

#include "exec/cuda/memset_nodes.hpp"

namespace eagle::detail {

namespace {

constexpr unsigned kThreads = 256;
constexpr std::size_t kChunksPerThread = 4;  // 16-byte chunks a thread stores on a full grid
constexpr unsigned kMaxBlocksX = 1024;
constexpr unsigned kMaxBlocksY = 65535;

// The element's bytes repeated over 4 bytes: for 1, 2 and 4-byte elements the byte at an
// element-aligned address a + k is byte k % 4 of this word, as the memset writes it.
__device__ __forceinline__ uint32_t pattern_word(uint32_t value, uint32_t element_bytes) {
  if (element_bytes == 1) return (value & 0xffu) * 0x01010101u;
  if (element_bytes == 2) return (value & 0xffffu) * 0x00010001u;
  return value;
}

__global__ void __launch_bounds__(kThreads) memset_rows(const MemsetArgs a) {
  const uint32_t word = pattern_word(a.value, a.element_bytes);
  const std::size_t bytes = a.width * a.element_bytes;
  const std::size_t thread = std::size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::size_t threads = std::size_t(gridDim.x) * blockDim.x;
  for (std::size_t row = blockIdx.y; row < a.height; row += gridDim.y) {
    char* base = a.dst + row * a.pitch;
    const uintptr_t start = reinterpret_cast<uintptr_t>(base);
    const std::size_t head = std::min<std::size_t>((16 - start % 16) % 16, bytes);
    const std::size_t chunks = (bytes - head) / 16;
    const std::size_t tail_from = head + chunks * 16;
    // The base is element-aligned (a memset's rule), so an address's byte of the pattern is its
    // address modulo 4.
    auto byte_at = [&](std::size_t k) {
      const uintptr_t at = start + k;
      base[k] = static_cast<char>((word >> (8 * (at % 4))) & 0xffu);
    };
    if (thread < head) byte_at(thread);
    if (thread < bytes - tail_from) byte_at(tail_from + thread);
    uint4* body = reinterpret_cast<uint4*>(base + head);
    const uint4 v = make_uint4(word, word, word, word);
    for (std::size_t c = thread; c < chunks; c += threads) body[c] = v;
  }
}

}  // namespace

const void* memset_kernel() {
  return reinterpret_cast<const void*>(&memset_rows);
}

void memset_launch_shape(const MemsetArgs& a, dim3& grid, dim3& block) {
  const std::size_t chunks = (a.width * a.element_bytes) / 16 + 1;
  const std::size_t per_block = kThreads * kChunksPerThread;
  grid = dim3(static_cast<unsigned>(
                  std::clamp<std::size_t>((chunks + per_block - 1) / per_block, 1, kMaxBlocksX)),
              static_cast<unsigned>(std::clamp<std::size_t>(a.height, 1, kMaxBlocksY)));
  block = dim3(kThreads);
}

}  // namespace eagle::detail
