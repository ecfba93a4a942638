// Internal: what the graph hands an executor, and what an executor does.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "eagle/core/device.hpp"
#include "eagle/kernel/kernel.hpp"

namespace eagle {
class Stream;
class ThreadTeam;
}  // namespace eagle

namespace eagle::detail {

// One node with its arguments resolved to real pointers. The graph owns these and rewrites
// `args` / `copy_src` / `copy_dst` on bind; the executor reads them.
struct PlannedNode {
  bool is_copy = false;
  std::string label;
  KernelImpl impl;
  KernelArgs args{};
  void* copy_dst = nullptr;
  const void* copy_src = nullptr;
  std::size_t copy_bytes = 0;
  std::vector<int> deps;
};

class Executor {
 public:
  virtual ~Executor() = default;
  virtual void launch(int n) = 0;
  virtual void synchronize() = 0;
  // Re-reads the arguments of `nodes`; false when one cannot be patched (rebuild needed).
  virtual bool patch(const std::vector<int>& nodes) = 0;
  virtual std::string backend() const = 0;
  virtual std::string schedule() const = 0;
  virtual int native_node_count() const = 0;
  virtual void* native_graph() const { return nullptr; }
  virtual void* native_graph_exec() const { return nullptr; }
};

std::unique_ptr<Executor> make_cpu_executor(const std::vector<PlannedNode>& nodes, int threads);
// `nodes` must outlive the executor. Throws NotSupported naming a node without a CUDA version.
std::unique_ptr<Executor> make_cuda_executor(const std::vector<PlannedNode>& nodes, Device device,
                                             const Stream& stream);

}  // namespace eagle::detail
