// A call written against the Call interface directly, as a library integration would be: it
// copies a u32 array, and counts how eagle made it run, enter a CUDA graph and get patched.
#pragma once

#include <atomic>
#include <memory>

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
};

// A kernel "copy_u32(x) -> out" running through a Call of the given kind. The Call declares a
// library (its handle is counted in `counts`) and a workspace of 256 bytes. Its CUDA parts exist
// only in a CUDA build.
Kernel copy_call_kernel(CopyEntry entry, std::shared_ptr<CallCounts> counts);

}  // namespace eagle::test
