// Internal: what a recorded kernel node runs on a device, the bytes of workspace it asks for, and
// the arena slots a graph's arrays and workspaces take. Shared by Graph::build (which resolves the
// node's pointers and lays the arena out) and MemoryArena::bytes_for (which sizes an arena before
// any graph is built, from the recorded shapes alone).
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "eagle/core/device.hpp"
#include "eagle/graph/recording.hpp"
#include "eagle/kernel/call.hpp"

namespace eagle::detail {

// The Call recorded kernel node `node` runs on `device`: a binder's (a planned operation, bound
// once per device and cached by the kernel) or the kernel's own. Throws what binding throws.
std::shared_ptr<const Call> node_call(const Recording& rec, int node, Device device);

// Node `node`'s argument block as recorded: its scalars, its arrays' shapes, dtypes and strides,
// no data pointers yet (Graph::build fills them).
ArgBlock recorded_args(const Recording& rec, int node);

// Per recorded node: the workspace bytes its call asks for on `device` (0 for nodes that are not
// kernels or ask for none). Workspaces depend on shapes and scalars, never on addresses.
std::vector<std::size_t> node_workspace_bytes(const Recording& rec, Device device);

// Bytes an arena slot of `bytes` takes: rounded up to MemoryArena::kAlignment.
std::size_t arena_slot(std::size_t bytes);
// The arena bytes of the graph's own arrays (one slot each): where its calls' workspaces begin.
std::size_t arena_array_bytes(const Recording& rec);

}  // namespace eagle::detail
