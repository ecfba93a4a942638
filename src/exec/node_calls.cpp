#include "exec/node_calls.hpp"

#include "eagle/exec/arena.hpp"
#include "eagle/kernel/kernel.hpp"

namespace eagle::detail {

std::shared_ptr<const Call> node_call(const Recording& rec, int node, Device device) {
  const auto& binder = rec.kernel_of(node).def().binder;
  return binder ? binder->bind(device)
                : make_kernel_call(rec.impl_of(node),
                                   rec.nodes()[static_cast<std::size_t>(node)].kernel);
}

ArgBlock recorded_args(const Recording& rec, int node) {
  const NodeInfo& n = rec.nodes()[static_cast<std::size_t>(node)];
  ArgBlock args(static_cast<int>(n.arrays.size()), static_cast<int>(n.scalars.size()));
  for (std::size_t s = 0; s < n.scalars.size(); ++s)
    args.scalar(static_cast<int>(s)) = n.scalars[s];
  for (std::size_t a = 0; a < n.arrays.size(); ++a) {
    const NodeArgInfo& arg = n.arrays[a];
    args.array(static_cast<int>(a)) = make_array_arg(nullptr, arg.shape, arg.dtype, arg.strides);
  }
  return args;
}

std::vector<std::size_t> node_workspace_bytes(const Recording& rec, Device device) {
  const auto& nodes = rec.nodes();
  std::vector<std::size_t> bytes(nodes.size(), 0);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].kind != NodeKind::kernel) continue;
    const int node = static_cast<int>(i);
    bytes[i] = node_call(rec, node, device)->workspace_bytes(recorded_args(rec, node), device);
  }
  return bytes;
}

std::size_t arena_array_bytes(const Recording& rec) {
  std::size_t total = 0;
  for (const BufferInfo& b : rec.buffers())
    if (b.kind == BufferKind::internal && b.merged_into < 0) total += arena_slot(b.bytes);
  return total;
}

std::size_t arena_slot(std::size_t bytes) {
  return (bytes + MemoryArena::kAlignment - 1) / MemoryArena::kAlignment * MemoryArena::kAlignment;
}

}  // namespace eagle::detail
