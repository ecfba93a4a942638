// The CPU backend. Without device conditions: nodes grouped into stages (a node's stage is one
// past its deepest dependency), run as one flat loop, each kernel over the thread team. With
// them: the lists run in program order and each control node reads its cell on the host.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

#include "eagle/kernel/thread_team.hpp"
#include "exec/executor.hpp"

namespace eagle::detail {

namespace {

class HostSchedule final : public Executor {
 public:
  HostSchedule(const Plan& plan, int threads) : plan_(plan), nodes_(plan.nodes), team_(threads) {
    // Each call has its own context and host workspace (fork branches may run calls at once);
    // one handle per library the calls need.
    contexts_.resize(nodes_.size());
    workspaces_.resize(nodes_.size());
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      const PlannedNode& n = nodes_[i];
      if (!n.call) continue;
      CallContext& ctx = contexts_[i];
      ctx.team = &team_;
      if (const Library* library = n.call->library())
        ctx.handle = handles_.get(library, Device::cpu(), nullptr);
      use_workspace(i);
    }
    if (plan.control_flow) {
      stages_ = static_cast<int>(plan.top.size());
      return;
    }
    const auto& nodes = nodes_;
    std::vector<int> stage_of(nodes.size(), 0);
    int stages = 0;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
      for (int d : nodes[i].deps) stage_of[i] = std::max(stage_of[i], stage_of[d] + 1);
      stages = std::max(stages, stage_of[i] + 1);
    }
    // Flattened in stage order (a counting sort, stable within a stage): the replay is one loop
    // over one array.
    std::vector<int> start(static_cast<std::size_t>(stages) + 1, 0);
    for (int st : stage_of) ++start[static_cast<std::size_t>(st) + 1];
    for (std::size_t k = 1; k < start.size(); ++k) start[k] += start[k - 1];
    order_.resize(nodes.size());
    for (std::size_t i = 0; i < nodes.size(); ++i)
      order_[static_cast<std::size_t>(start[static_cast<std::size_t>(stage_of[i])]++)] =
          static_cast<int>(i);
    stages_ = stages;
  }

  void launch(int n) override {
    for (int k = 0; k < n; ++k) {
      if (plan_.control_flow)
        run_list(plan_.top);
      else
        for (int i : order_) run_leaf(nodes_[i]);
      if (trace_) ++trace_->launch;
    }
  }
  void synchronize() override {}
  void set_trace(TraceSink* sink) override { trace_ = sink; }
  // Arguments are read at each launch; a call's workspace may have to grow.
  bool patch(const std::vector<int>& ids, std::string&) override {
    for (int i : ids)
      if (nodes_[i].call) use_workspace(static_cast<std::size_t>(i));
    return true;
  }
  std::string backend() const override { return "cpu-host-schedule"; }
  std::string schedule() const override {
    if (plan_.control_flow)
      return "host schedule: " + std::to_string(nodes_.size()) + " nodes with device conditions, " +
             std::to_string(plan_.top.size()) + " top-level, in program order over a team of " +
             std::to_string(team_.size()) + " threads";
    return "host schedule: " + std::to_string(nodes_.size()) + " nodes in " +
           std::to_string(stages_) + " stages over a team of " + std::to_string(team_.size()) +
           " threads";
  }
  int native_node_count() const override { return static_cast<int>(nodes_.size()); }

 private:
  void run_leaf(const PlannedNode& node) const {
    const auto i = static_cast<std::size_t>(&node - nodes_.data());
    const int64_t begin = trace_ ? now_ns() : 0;
    if (node.kind == PlannedNode::Kind::copy)
      std::memcpy(node.copy_dst, node.copy_src, node.copy_bytes);
    else
      node.call->run(node.args, contexts_[i]);
    if (trace_)
      trace_->add(
          {static_cast<int>(i), trace_->launch, std::this_thread::get_id(), begin, now_ns()});
  }
  static int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  void run_list(const std::vector<int>& list) const {
    using Kind = PlannedNode::Kind;
    for (int i : list) {
      const PlannedNode& node = nodes_[i];
      switch (node.kind) {
        case Kind::kernel:
        case Kind::copy:
          run_leaf(node);
          break;
        case Kind::if_:
          if (*node.cond != 0) {
            run_list(node.bodies[0]);
          } else if (node.bodies.size() > 1) {
            run_list(node.bodies[1]);
          }
          break;
        case Kind::switch_:
          if (*node.cond < node.bodies.size()) run_list(node.bodies[*node.cond]);
          break;
        case Kind::while_:
          while (*node.cond != 0) run_list(node.bodies[0]);
          break;
        case Kind::fork:
          run_fork(node);
          break;
      }
    }
  }

  // Branches run as tasks of the team; with waits between them, in order (a wait only ever
  // points to an earlier branch, so order satisfies it).
  void run_fork(const PlannedNode& fork) const {
    bool waits = false;
    for (const auto& branch : fork.bodies)
      for (int i : branch) waits = waits || !nodes_[i].waits.empty();
    if (waits) {
      for (const auto& branch : fork.bodies) run_list(branch);
      return;
    }
    team_.tasks(static_cast<int>(fork.bodies.size()), [&](int b) { run_list(fork.bodies[b]); });
  }

  const Plan& plan_;
  const std::vector<PlannedNode>& nodes_;
  ThreadTeam team_;
  LibraryHandles handles_;
  std::vector<CallContext> contexts_;
  // Points call i's context at the workspace it needs: its slot in the graph's arena when the
  // graph placed one that is large enough, else a host buffer of its own (grown, never shrunk).
  void use_workspace(std::size_t i) {
    const PlannedNode& n = nodes_[i];
    CallContext& ctx = contexts_[i];
    const std::size_t bytes = n.call->workspace_bytes(n.args, Device::cpu());
    if (n.workspace && bytes <= n.workspace_bytes) {
      ctx.workspace = n.workspace;
      ctx.workspace_bytes = n.workspace_bytes;
      return;
    }
    if (bytes > workspaces_[i].size()) workspaces_[i].resize(bytes);
    ctx.workspace = workspaces_[i].data();
    ctx.workspace_bytes = workspaces_[i].size();
  }

  std::vector<std::vector<char>> workspaces_;
  TraceSink* trace_ = nullptr;
  std::vector<int> order_;
  int stages_ = 0;
};

}  // namespace

std::unique_ptr<Executor> make_cpu_executor(const Plan& plan, int threads) {
  return std::make_unique<HostSchedule>(plan, threads);
}

}  // namespace eagle::detail
