// The CPU backend: nodes grouped into stages (a node's stage is one past its deepest
// dependency); each stage runs its nodes one after another, each kernel over the thread team.
#include <algorithm>
#include <cstring>

#include "eagle/kernel/thread_team.hpp"
#include "exec/executor.hpp"

namespace eagle::detail {

namespace {

class HostSchedule final : public Executor {
 public:
  HostSchedule(const std::vector<PlannedNode>& nodes, int threads) : nodes_(nodes), team_(threads) {
    std::vector<int> stage_of(nodes.size(), 0);
    int stages = 0;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      for (int d : nodes[i].deps) stage_of[i] = std::max(stage_of[i], stage_of[d] + 1);
      stages = std::max(stages, stage_of[i] + 1);
    }
    // Flattened in stage order: the replay is one loop over one array.
    for (int s = 0; s < stages; ++s)
      for (std::size_t i = 0; i < nodes.size(); ++i)
        if (stage_of[i] == s) order_.push_back(static_cast<int>(i));
    stages_ = stages;
  }

  void launch(int n) override {
    for (int k = 0; k < n; ++k) {
      for (int i : order_) {
        const PlannedNode& node = nodes_[i];
        if (node.is_copy) {
          std::memcpy(node.copy_dst, node.copy_src, node.copy_bytes);
        } else {
          node.impl.cpu(node.args, team_);
        }
      }
    }
  }
  void synchronize() override {}
  bool patch(const std::vector<int>&) override { return true; }  // arguments are read per launch
  std::string backend() const override { return "cpu-host-schedule"; }
  std::string schedule() const override {
    return "host schedule: " + std::to_string(nodes_.size()) + " nodes in " +
           std::to_string(stages_) + " stages over a team of " + std::to_string(team_.size()) +
           " threads";
  }
  int native_node_count() const override { return static_cast<int>(order_.size()); }

 private:
  const std::vector<PlannedNode>& nodes_;
  ThreadTeam team_;
  std::vector<int> order_;
  int stages_ = 0;
};

}  // namespace

std::unique_ptr<Executor> make_cpu_executor(const std::vector<PlannedNode>& nodes, int threads) {
  return std::make_unique<HostSchedule>(nodes, threads);
}

}  // namespace eagle::detail
