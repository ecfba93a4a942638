// A call written against the Call interface directly, as a library integration would be: it
// copies a u32 array, and counts how eagle made it run, enter a CUDA graph and get patched.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "eagle/kernel/kernel.hpp"

namespace eagle::test {

struct CallCounts {
  std::atomic<int> runs{0}, populates{0}, updates{0}, handles_made{0}, handles_freed{0};
  std::atomic<int> last_workspace_bytes{0};
  std::atomic<const void*> last_workspace{nullptr};
  std::atomic<bool> handle_seen{false};  // run/populate saw the library's handle in ctx.handle
};

enum class CopyEntry {
  populate,           // adds a memcpy node to its child graph; update_cuda_graph patches it
  populate_reshaped,  // update refuses, and each populate adds one more node: not patchable
  capture,            // neither: run() (a copy on the stream) is stream-captured
  populate_memsets,   // a memcpy node, then the memset nodes of copy_call_memsets() over `out`
};

// A memset over a copy's output: `height` rows `pitch` bytes apart from byte `offset`, each
// `width` elements of `element_bytes` bytes equal to the low bytes of `value`.
struct OutputMemset {
  std::size_t offset, pitch, width, height;
  uint32_t value, element_bytes;
};

// The memsets a populate_memsets call chains after its copy of 1000 u32 (4000 bytes), in order:
// unaligned starts, odd widths, several rows, and 1, 2 and 4-byte elements.
const std::vector<OutputMemset>& copy_call_memsets();

// `bytes` after copy_call_memsets() wrote over them, as the call's CPU run does.
void apply_copy_call_memsets(unsigned char* bytes);

// The memset nodes of a CUDA graph (a cudaGraph_t) and of the graphs it nests; -1 in a build
// without CUDA.
int memset_node_count(void* graph);

// The root nodes of a CUDA graph (a cudaGraph_t; its own, not those of graphs it nests); -1 in
// a build without CUDA.
int root_node_count(void* graph);

// A kernel "copy_u32(x) -> out" running through a Call of the given kind. The Call declares a
// library (its handle is counted in `counts`) and a workspace of 256 bytes. Its CUDA parts exist
// only in a CUDA build.
Kernel copy_call_kernel(CopyEntry entry, std::shared_ptr<CallCounts> counts);

}  // namespace eagle::test
