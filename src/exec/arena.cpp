#include "eagle/exec/arena.hpp"

#include <string>

#include "eagle/core/error.hpp"
#include "eagle/graph/recording.hpp"

namespace eagle {

MemoryArena::MemoryArena(Device device, std::size_t bytes) {
  if (bytes == 0) throw InvalidArgument("MemoryArena: bytes must be > 0");
  storage_ = Storage::allocate(device, bytes);
}

std::size_t MemoryArena::bytes_for(const Recording& recording) {
  std::size_t total = 0;
  for (const BufferInfo& b : recording.buffers()) {
    if (b.kind != BufferKind::internal || b.merged_into >= 0) continue;
    total += (b.bytes + kAlignment - 1) / kAlignment * kAlignment;
  }
  return total;
}

}  // namespace eagle
