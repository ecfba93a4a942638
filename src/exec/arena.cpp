#include "eagle/exec/arena.hpp"

#include <string>

#include "eagle/core/error.hpp"
#include "eagle/graph/recording.hpp"
#include "exec/node_calls.hpp"

namespace eagle {

MemoryArena::MemoryArena(Device device, std::size_t bytes) {
  if (bytes == 0) throw InvalidArgument("MemoryArena: bytes must be > 0");
  storage_ = Storage::allocate(device, bytes);
}

std::size_t MemoryArena::bytes_for(const Recording& recording, Device device) {
  std::size_t total = detail::arena_array_bytes(recording);
  for (std::size_t bytes : detail::node_workspace_bytes(recording, device))
    if (bytes > 0) total += detail::arena_slot(bytes);
  return total;
}

}  // namespace eagle
