// RecordOptions::record: before a node overwrites in place an array that a derivative reads (of
// an earlier node, or the node's own input), a `save` node copies it and the reverse pass reads
// the copy (placed so it runs whenever the reader ran: before the construct holding the writer
// when the reader is not in it); inside a capped loop, each turn writes what derivatives read
// (and if conditions) into row `turn` of a tape instead; and the name map, made when the
// recording is finished.
#include <algorithm>
#include <map>

#include "eagle/core/error.hpp"
#include "eagle/core/shape.hpp"
#include "eagle/graph/derivative.hpp"
#include "eagle/kernel/tape.hpp"
#include "graph/state.hpp"

namespace eagle {

namespace {

// Argument `slot` of a kernel node whose derivative reads its contents.
bool read_by_derivative(const Kernel* kernel, int slot) {
  if (!kernel || kernel->def().no_gradient) return false;
  const VjpRule* rule = derivative_of(*kernel);
  return rule && rule->reads(slot);
}

struct Need {
  int node;  // -1: the node being added
  int slot;
  NodeArgInfo arg;
};

// Where a save for a need goes: nowhere (the need's node and the writer never both run), at the
// writer (before it), or before node `before` (a construct holding the writer, not the need).
struct Placement {
  bool skip = false;
  int before = -1;
};

}  // namespace

bool Recording::State::derivative_reads(int id, int slot) const {
  const NodeInfo& n = nodes[static_cast<std::size_t>(id)];
  if (n.kind == NodeKind::if_ || n.kind == NodeKind::switch_) return slot == 0;
  if (n.kind != NodeKind::kernel) return false;
  return read_by_derivative(kernels[static_cast<std::size_t>(id)].get(), slot);
}

std::vector<std::pair<int, int>> Recording::State::chain_of(int id) const {
  std::vector<std::pair<int, int>> chain;
  for (int child = id, p = nodes[static_cast<std::size_t>(id)].parent; p >= 0;
       child = p, p = nodes[static_cast<std::size_t>(p)].parent) {
    const auto& bodies = nodes[static_cast<std::size_t>(p)].bodies;
    int arm = 0;
    for (std::size_t b = 0; b < bodies.size(); ++b)
      if (std::find(bodies[b].begin(), bodies[b].end(), child) != bodies[b].end())
        arm = static_cast<int>(b);
    chain.emplace_back(p, arm);
  }
  std::reverse(chain.begin(), chain.end());
  return chain;
}

namespace {

// A save must run whenever the need's node ran, after it, and before the writer. At the writer
// is right when every construct holding the writer holds the need's node too; otherwise it goes
// before the outermost construct holding the writer and not the node (whose list holds both).
// Different arms of one if / switch never both run: nothing to save. Different branches of a
// fork: before the writer's item of its branch (ordered after the node by the branch's waits).
Placement place(const std::vector<NodeInfo>& nodes, const std::vector<std::pair<int, int>>& need,
                const std::vector<std::pair<int, int>>& writer) {
  std::size_t i = 0;
  while (i < need.size() && i < writer.size() && need[i] == writer[i]) ++i;
  if (i < need.size() && i < writer.size() && need[i].first == writer[i].first) {
    if (nodes[static_cast<std::size_t>(writer[i].first)].kind != NodeKind::fork) return {true, -1};
    ++i;  // another branch of the same fork
  }
  if (i >= writer.size()) return {};
  return {false, writer[i].first};
}

}  // namespace

int Recording::State::insert_before(NodeInfo node, int before, bool after) {
  const int parent = nodes[static_cast<std::size_t>(before)].parent;
  node.id = static_cast<int>(nodes.size());
  node.parent = parent;
  std::vector<int>* list = &top;
  if (parent >= 0) {
    NodeInfo& p = nodes[static_cast<std::size_t>(parent)];
    for (auto& body : p.bodies)
      if (std::find(body.begin(), body.end(), before) != body.end()) list = &body;
    if (p.kind == NodeKind::fork && !after)
      node.waits = nodes[static_cast<std::size_t>(before)].waits;
  }
  for (const NodeArgInfo& a : node.arrays) {
    auto& on = nodes_of_buffer[static_cast<std::size_t>(a.buffer)];
    if (on.empty() || on.back() != node.id) on.push_back(node.id);
  }
  list->insert(std::find(list->begin(), list->end(), before) + (after ? 1 : 0), node.id);
  snapshots.emplace_back(node.arrays.size());
  nodes.push_back(std::move(node));
  kernels.push_back(nullptr);
  impls.push_back(KernelImpl{});
  return static_cast<int>(nodes.size()) - 1;
}

void Recording::State::set_snapshot(int node, int slot, Snapshot snap) {
  Snapshot& at = snapshots[static_cast<std::size_t>(node)][static_cast<std::size_t>(slot)];
  journal.push_back(Undo{Undo::Kind::snapshot, node, slot, 0, 0, snapshot_undo.size()});
  snapshot_undo.push_back(at);
  at = std::move(snap);
}

namespace {

int open_loops(const std::vector<NodeInfo>& nodes, const std::vector<std::pair<int, int>>& open) {
  int n = 0;
  for (const auto& o : open) n += nodes[static_cast<std::size_t>(o.first)].kind == NodeKind::while_;
  return n;
}

Snapshot not_taped(const std::string& what) {
  return {Snapshot::State::lost,
          {},
          what +
              " inside a loop that is not taped (a while_ without max_turns, or a loop "
              "inside one)"};
}

// Taped, once the loop is recorded and it is known whether the loop writes the argument (then a
// tape, else nothing: it holds the same in every turn). Marked by a tape of buffer -1.
Snapshot pending() {
  Snapshot p{Snapshot::State::taped, NodeArgInfo{}, {}};
  p.saved.buffer = -1;
  return p;
}
bool is_pending(const Snapshot& s) {
  return s.state == Snapshot::State::taped && s.saved.buffer < 0;
}

}  // namespace

Snapshot Recording::State::note_condition(const NodeArgInfo&) {
  if (!saving() || open_loops(nodes, open) == 0) return {};
  if (all_loops_taped()) return pending();
  return not_taped("a condition");
}

void Recording::State::tape_outputs(int id) {
  if (!saving() || open_loops(nodes, open) == 0) return;
  const NodeInfo& n = nodes[static_cast<std::size_t>(id)];
  for (std::size_t k = 0; k < n.arrays.size(); ++k) {
    if (reads(n.arrays[k].access) || !derivative_reads(id, static_cast<int>(k))) continue;
    snapshots[static_cast<std::size_t>(id)][k] =
        all_loops_taped() ? pending() : not_taped(node_name(n) + " (kernel " + n.kernel + ")");
  }
}

void Recording::State::resolve_tapes(int loop) {
  const TapeFrame f = tapes.back();
  std::vector<NodeArgInfo> inside;
  subtree_accesses(loop, inside);
  std::vector<std::pair<int, int>> todo;
  std::vector<int> stack{loop};
  while (!stack.empty()) {
    const NodeInfo& n = nodes[static_cast<std::size_t>(stack.back())];
    stack.pop_back();
    for (const auto& body : n.bodies) stack.insert(stack.end(), body.begin(), body.end());
    for (std::size_t k = 0; k < n.arrays.size(); ++k)
      if (is_pending(snapshots[static_cast<std::size_t>(n.id)][k]))
        todo.emplace_back(n.id, static_cast<int>(k));
  }
  std::sort(todo.begin(), todo.end());
  const BufferInfo index = buffers[static_cast<std::size_t>(f.index.buffer())];
  for (const auto& [id, slot] : todo) {
    const NodeInfo& n = nodes[static_cast<std::size_t>(id)];
    const NodeArgInfo a = n.arrays[static_cast<std::size_t>(slot)];
    const std::string label = "tape " + n.label + "." + a.param;
    const bool written = std::any_of(inside.begin(), inside.end(), [&](const NodeArgInfo& w) {
      return w.buffer == a.buffer && writes(w.access) &&
             overlaps(w.byte_offset, w.byte_offset + w.bytes, a.byte_offset,
                      a.byte_offset + a.bytes);
    });
    auto& snap = snapshots[static_cast<std::size_t>(id)][static_cast<std::size_t>(slot)];
    if (!written) {
      // The loop never writes it: the same in every turn; an enclosing loop decides.
      if (tapes.size() == 1) snap = Snapshot{};
      continue;
    }
    Shape shape{f.rows};
    shape.insert(shape.end(), a.shape.begin(), a.shape.end());
    const int tape = new_buffer(BufferKind::internal, shape, a.dtype, label);
    scope[static_cast<std::size_t>(tape)] = {-1, -1};  // the reverse reads it after the loop
    const auto bytes = static_cast<int64_t>(buffers[static_cast<std::size_t>(tape)].bytes);
    NodeInfo t;
    t.kind = NodeKind::kernel;
    t.label = label;
    t.kernel = kernels::tape_write().name();
    // A strided view is taped as it lies (tape_write reads its strides); its row is contiguous.
    t.arrays = {
        {"src", Access::read, a.buffer, a.byte_offset, a.bytes, a.shape, a.dtype, a.strides},
        {"index", Access::read, index.id, 0, static_cast<int64_t>(index.bytes), index.shape,
         index.dtype},
        {"tape", Access::read_write, tape, 0, bytes, shape, a.dtype}};
    // A read argument is taped before the node, a written one after it.
    const int t_id = insert_before(std::move(t), id, !reads(a.access));
    kernels[static_cast<std::size_t>(t_id)] = std::make_unique<Kernel>(kernels::tape_write());
    impls[static_cast<std::size_t>(t_id)] =
        kernels::tape_write().select({a.dtype, DType::u32, a.dtype});
    snapshots[static_cast<std::size_t>(id)][static_cast<std::size_t>(slot)] = {
        Snapshot::State::taped, {"tape", Access::read, tape, 0, bytes, shape, a.dtype}, {}};
  }
}

namespace {

// The reads of nodes recorded before `writer` (all nodes so far when writer < 0) that a
// derivative needs and `w` overwrites, grouped by where their save goes: the key is the node to
// save before (the writer itself when writer >= 0 and the save goes at it; -1: at the end, for
// a node not added yet). Reads before the save horizon are marked lost instead.
std::map<int, std::vector<Need>> earlier_needs(Recording::State& s, const NodeArgInfo& w,
                                               int writer, const std::string& by,
                                               const std::vector<std::pair<int, int>>& chain) {
  const int64_t w_lo = w.byte_offset, w_hi = w.byte_offset + w.bytes;
  std::map<int, std::vector<Need>> groups;
  for (int id : s.nodes_of_buffer[static_cast<std::size_t>(w.buffer)]) {
    if (writer >= 0 && id >= writer) continue;  // recorded after the writer: reads what it wrote
    const NodeInfo& n = s.nodes[static_cast<std::size_t>(id)];
    for (std::size_t k = 0; k < n.arrays.size(); ++k) {
      const NodeArgInfo& a = n.arrays[k];
      const Snapshot& snap = s.snapshots[static_cast<std::size_t>(id)][k];
      if (snap.state != Snapshot::State::intact || a.buffer != w.buffer ||
          !overlaps(a.byte_offset, a.byte_offset + a.bytes, w_lo, w_hi) ||
          !s.derivative_reads(id, static_cast<int>(k)))
        continue;
      if (id < s.save_horizon) {
        s.set_snapshot(id, static_cast<int>(k),
                       {Snapshot::State::lost,
                        {},
                        by + " after Recorder::release_saves (its reverse was recorded)"});
        continue;
      }
      const Placement p = place(s.nodes, s.chain_of(id), chain);
      if (p.skip) continue;
      groups[p.before < 0 && writer >= 0 ? writer : p.before].push_back(
          {id, static_cast<int>(k), a});
    }
  }
  return groups;
}

// A save node copying `bytes` of `buffer` from byte `lo` (viewed as `shape`) into a new array,
// added at the end (before < 0) or right before node `before`; returns the copy's buffer.
int add_save(Recording::State& s, int buffer, int64_t lo, const Shape& shape, int64_t bytes,
             int before, const std::string& label) {
  const BufferInfo src = s.buffers[static_cast<std::size_t>(buffer)];
  const int copy = s.new_buffer(BufferKind::internal, shape, src.dtype,
                                "save#" + std::to_string(s.nodes.size()) + " " + src.label);
  s.scope[static_cast<std::size_t>(copy)] = {-1, -1};  // the reverse reads it anywhere
  NodeInfo save;
  save.kind = NodeKind::save;
  save.label = label;
  save.kernel = "save";
  save.arrays = {{"src", Access::read, buffer, lo, bytes, shape, src.dtype},
                 {"dst", Access::write, copy, 0, bytes, shape, src.dtype}};
  if (before < 0)
    s.add_node(std::move(save), nullptr, KernelImpl{});
  else
    s.insert_before(std::move(save), before);
  return copy;
}

// Saves each group of needs of `w` (the node about to be added writes it): the written view
// when it is contiguous and holds every needed view, else the whole buffer; each need then reads
// the copy (the node's own, need.node < 0, through `own`).
void save_groups(Recording::State& s, const NodeArgInfo& w, const std::string& writer_label,
                 const std::map<int, std::vector<Need>>& groups, std::vector<Snapshot>& own) {
  const int64_t w_lo = w.byte_offset, w_hi = w.byte_offset + w.bytes;
  const BufferInfo src = s.buffers[static_cast<std::size_t>(w.buffer)];
  for (const auto& [before, kept] : groups) {
    const bool view_only =
        w.strides.empty() && std::all_of(kept.begin(), kept.end(), [&](const Need& need) {
          return need.arg.byte_offset >= w_lo && need.arg.byte_offset + need.arg.bytes <= w_hi;
        });
    const int64_t lo = view_only ? w_lo : 0;
    const int copy = add_save(s, w.buffer, lo, view_only ? w.shape : src.shape,
                              view_only ? w.bytes : static_cast<int64_t>(src.bytes), before,
                              "save " + src.label + " before " + writer_label);
    for (const Need& need : kept) {
      NodeArgInfo at = need.arg;
      at.buffer = copy;
      at.byte_offset -= lo;
      const Snapshot snap{Snapshot::State::saved, at, {}};
      if (need.node < 0)
        own[static_cast<std::size_t>(need.slot)] = snap;
      else
        s.set_snapshot(need.node, need.slot, snap);
    }
  }
}

}  // namespace

std::vector<Snapshot> Recording::State::save_overwritten(const NodeInfo& node,
                                                         const Kernel& kernel) {
  std::vector<Snapshot> own(node.arrays.size());
  if (!saving()) return own;
  const std::string by = node_name(node) + " (kernel " + node.kernel + ")";
  // Inside a loop the node's own reads are taped per turn (or lost), not saved.
  const auto own_read = [&](std::size_t k) {
    return reads(node.arrays[k].access) && read_by_derivative(&kernel, static_cast<int>(k));
  };
  if (open_loops(nodes, open) > 0)
    for (std::size_t k = 0; k < node.arrays.size(); ++k)
      if (own_read(k)) own[k] = all_loops_taped() ? pending() : not_taped(by);
  for (const NodeArgInfo& w : node.arrays) {
    if (!writes(w.access)) continue;
    std::map<int, std::vector<Need>> groups = earlier_needs(*this, w, -1, by, open);
    for (std::size_t k = 0; k < node.arrays.size(); ++k) {
      const NodeArgInfo& a = node.arrays[k];
      if (own_read(k) && own[k].state == Snapshot::State::intact && a.buffer == w.buffer &&
          overlaps(a.byte_offset, a.byte_offset + a.bytes, w.byte_offset, w.byte_offset + w.bytes))
        groups[-1].push_back({-1, static_cast<int>(k), a});
    }
    save_groups(*this, w, node.label, groups, own);
  }
  return own;
}

void Recording::State::save_before_existing(int writer, const NodeArgInfo& w) {
  if (!saving()) return;
  const std::string by = node_name(nodes[static_cast<std::size_t>(writer)]);
  const std::map<int, std::vector<Need>> groups =
      earlier_needs(*this, w, writer, by, chain_of(writer));
  const BufferInfo src = buffers[static_cast<std::size_t>(w.buffer)];
  for (const auto& [before, kept] : groups) {
    const int copy = add_save(*this, w.buffer, 0, src.shape, static_cast<int64_t>(src.bytes),
                              before, "save " + src.label + " before " + by);
    for (const Need& need : kept) {
      NodeArgInfo at = need.arg;
      at.buffer = copy;
      set_snapshot(need.node, need.slot, {Snapshot::State::saved, at, {}});
    }
  }
}

void Recording::State::make_names() {
  auto add = [&](const std::string& name, NodeArgInfo view) {
    view.param = name;
    auto [it, fresh] = names.emplace(name, view);
    if (!fresh) it->second.buffer = -1;  // ambiguous
  };
  auto whole = [&](int b) {
    const BufferInfo& info = buffers[static_cast<std::size_t>(b)];
    return NodeArgInfo{"",         Access::read, b, 0, static_cast<int64_t>(info.bytes),
                       info.shape, info.dtype};
  };
  for (const BufferInfo& b : buffers) {
    if (b.merged_into >= 0) continue;
    if (b.kind == BufferKind::param) add(b.label, whole(b.id));
    if (b.kind == BufferKind::external) add(b.label, whole(b.id));
    if (b.kind == BufferKind::internal && labeled[static_cast<std::size_t>(b.id)])
      add(b.label, whole(b.id));
  }
  for (std::size_t i = 0; i < results.size(); ++i) {
    add("result." + std::to_string(i), results[i]);
    if (results.size() == 1) add("result", results[i]);
  }
}

// ---- the recorder's side

const Recording& Recorder::recording() const {
  return *rec_;
}

bool Recorder::at_top_level() const {
  return rec_->s_->open.empty();
}

void Recorder::without_saves(const std::function<void()>& body) {
  Recording::State& s = *rec_->s_;
  s.check_open("Recorder::without_saves");
  struct Off {
    Recording::State& s;
    explicit Off(Recording::State& st) : s(st) { ++s.no_saving; }
    ~Off() { --s.no_saving; }
  } off(s);
  s.flush_deferred();
  Transaction t(s);
  body();
  s.flush_deferred();  // recorded without saves, as it was deferred
  t.commit();
}

void Recorder::release_saves() {
  Recording::State& s = *rec_->s_;
  s.check_open("Recorder::release_saves");
  s.flush_deferred();
  s.save_horizon = static_cast<int>(s.nodes.size());
}

}  // namespace eagle
