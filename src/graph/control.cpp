// Device constructs (if / switch / while / capped for with break and continue / elif chains)
// and forks with waits.
#include <algorithm>

#include "eagle/core/error.hpp"
#include "eagle/core/shape.hpp"
#include "eagle/kernel/cells.hpp"
#include "eagle/kernel/standard.hpp"
#include "eagle/kernel/tape.hpp"
#include "graph/state.hpp"

namespace eagle {

std::string_view node_kind_name(NodeKind kind) {
  switch (kind) {
    case NodeKind::kernel:
      return "kernel";
    case NodeKind::copy_in:
      return "copy_in";
    case NodeKind::save:
      return "save";
    case NodeKind::if_:
      return "if";
    case NodeKind::switch_:
      return "switch";
    case NodeKind::while_:
      return "while";
    case NodeKind::fork:
      return "parallel";
  }
  return "?";
}

// The innermost open device construct and arm; fork branches always run, so they do not count.
std::pair<int, int> Recording::State::innermost_condition() const {
  for (auto it = open.rbegin(); it != open.rend(); ++it)
    if (nodes[static_cast<std::size_t>(it->first)].kind != NodeKind::fork) return *it;
  return {-1, -1};
}

int Recording::State::record_control(NodeKind kind, const Value& cell,
                                     const std::vector<std::function<void()>>& arms) {
  const std::string who = "Recorder::" + std::string(node_kind_name(kind)) + "_";
  const ValueData c = value(cell, who + ": cell");
  if (c.dtype != DType::u32 || checked_numel(c.shape, who) != 1)
    throw InvalidArgument(who + ": cell must be a one-cell u32 array (a device condition), got " +
                          std::string(dtype_name(c.dtype)) + shape_str(c.shape));
  if (arms.empty()) throw InvalidArgument(who + ": needs at least one arm");
  check_readable(c.buffer, who);
  for (std::size_t i = 0; i < arms.size(); ++i)
    if (!arms[i]) throw InvalidArgument(who + ": arm " + std::to_string(i) + " is empty");
  NodeInfo node;
  node.kind = kind;
  node.label = std::string(node_kind_name(kind));
  node.kernel = node.label;
  node.arrays = {arg_info("cond", Access::read, cell.id())};
  node.bodies.resize(arms.size());
  flush_deferred();
  const Snapshot cond = kind == NodeKind::while_ ? Snapshot{} : note_condition(node.arrays[0]);
  const int id = add_node(std::move(node), nullptr, KernelImpl{});
  snapshots[static_cast<std::size_t>(id)][0] = cond;
  for (std::size_t i = 0; i < arms.size(); ++i) {
    open.emplace_back(id, static_cast<int>(i));
    arms[i]();
    flush_deferred();
    open.pop_back();
  }
  return id;
}

void Recorder::if_(const Value& cell, const std::function<void()>& then_arm,
                   const std::function<void()>& else_arm) {
  Recording::State& s = *rec_->s_;
  s.check_open("Recorder::if_");
  if (!then_arm) throw InvalidArgument("Recorder::if_: then_arm is empty");
  std::vector<std::function<void()>> arms{then_arm};
  if (else_arm) arms.push_back(else_arm);
  Transaction t(s);
  s.record_control(NodeKind::if_, cell, arms);
  t.commit();
}

void Recorder::switch_(const Value& cell, const std::vector<std::function<void()>>& arms) {
  Recording::State& s = *rec_->s_;
  s.check_open("Recorder::switch_");
  Transaction t(s);
  s.record_control(NodeKind::switch_, cell, arms);
  t.commit();
}

// A loop; capped (max_turns >= 1), it stops after max_turns turns. With RecordOptions::record,
// a capped loop whose enclosing loops are all taped counts its turns in a cell, and the row of
// its tapes runs over the turns of all of them (the enclosing loop's row * cap + turn); its turn
// count is taped per row of the enclosing loop.
int Recording::State::record_loop(const Value& cell, const std::function<void()>& body,
                                  int64_t max_turns, bool for_loop) {
  Recorder r(self);
  const int64_t outer_rows = tapes.empty() ? 1 : tapes.back().rows;
  const bool taped = saving() && max_turns > 0 &&
                     static_cast<int>(tapes.size()) == open_loops_here() &&
                     max_turns <= static_cast<int64_t>(UINT32_MAX) / outer_rows;
  const bool nested = taped && !tapes.empty();
  Value turn, remaining, cap;
  if (taped) {
    turn = r.empty({1}, DType::u32, "loop.turn");
    labeled[static_cast<std::size_t>(turn.buffer())] = false;
    r.call(kernels::fill(), {0.0}, buffer(turn));
  }
  if (nested) {
    cap = r.empty({1}, DType::u32, "loop.cap");
    labeled[static_cast<std::size_t>(cap.buffer())] = false;
    r.call(kernels::fill(), {static_cast<double>(max_turns)}, buffer(cap));
  }
  if (max_turns > 0 && !for_loop) {
    remaining = r.empty({1}, DType::u32, "while.remaining");
    labeled[static_cast<std::size_t>(remaining.buffer())] = false;
    r.call(kernels::fill(), {static_cast<double>(max_turns)}, buffer(remaining));
  }
  const int id = record_control(
      NodeKind::while_, cell, {[&] {
        if (taped) {
          const Value index =
              nested ? r.call(kernels::cell_mad(), {tapes.back().index, cap, turn}) : turn;
          tapes.push_back({open.back().first, max_turns, turn, index, outer_rows * max_turns});
        }
        body();
        if (max_turns > 0 && !for_loop) {  // cell = cell && turns left
          const Value off = r.call(kernels::cell_none(), {cell, cell});
          r.call_all(kernels::loop_next(), {remaining, off}, buffer(cell));
        }
        if (taped) {
          resolve_tapes(open.back().first);
          r.call(kernels::cell_increment(), {turn}, buffer(turn));
          tapes.pop_back();
        }
      }});
  int turns_tape = -1;
  if (nested) {  // the turns it ran, per row of the enclosing loop
    const TapeFrame& outer = tapes.back();
    const Value t = r.empty({outer.rows, 1}, DType::u32, "tape loop.turns");
    labeled[static_cast<std::size_t>(t.buffer())] = false;
    scope[static_cast<std::size_t>(t.buffer())] = {-1, -1};
    r.call(kernels::tape_write(), {turn, outer.index, t});
    turns_tape = t.buffer();
  }
  NodeInfo& n = nodes[static_cast<std::size_t>(id)];
  n.max_turns = max_turns;
  n.turns = taped ? turn.buffer() : -1;
  n.turns_tape = turns_tape;
  return id;
}

int Recording::State::open_loops_here() const {
  int n = 0;
  for (const auto& o : open) n += nodes[static_cast<std::size_t>(o.first)].kind == NodeKind::while_;
  return n;
}

void Recorder::while_(const Value& cell, const std::function<void()>& body, int64_t max_turns) {
  Recording::State& s = *rec_->s_;
  s.check_open("Recorder::while_");
  if (!body) throw InvalidArgument("Recorder::while_: body is empty");
  if (max_turns == 0 || max_turns < -1 || max_turns > static_cast<int64_t>(UINT32_MAX))
    throw InvalidArgument("Recorder::while_: max_turns must be -1 (no cap) or in [1, 2^32), got " +
                          std::to_string(max_turns));
  Transaction t(s);
  const int id = s.record_loop(cell, body, max_turns, false);
  // A loop whose body never writes its cell could never stop once it started.
  const NodeArgInfo c = s.nodes[static_cast<std::size_t>(id)].arrays[0];
  std::vector<NodeArgInfo> inside;
  for (int child : s.nodes[static_cast<std::size_t>(id)].bodies[0])
    s.subtree_accesses(child, inside);
  const bool writes_cell = std::any_of(inside.begin(), inside.end(), [&](const NodeArgInfo& a) {
    return a.buffer == c.buffer && writes(a.access) &&
           overlaps(a.byte_offset, a.byte_offset + a.bytes, c.byte_offset, c.byte_offset + 4);
  });
  if (!writes_cell)
    throw RecordError("Recorder::while_: the body never writes its cell '" +
                      s.buffers[static_cast<std::size_t>(c.buffer)].label +
                      "', so the loop could never stop; update the cell inside the body");
  t.commit();
}

void Recorder::for_(int64_t n, const std::function<void()>& body) {
  Recording::State& s = *rec_->s_;
  s.check_open("Recorder::for_");
  if (n < 0) throw InvalidArgument("Recorder::for_: n must be >= 0, got " + std::to_string(n));
  if (n > static_cast<int64_t>(UINT32_MAX))
    throw InvalidArgument("Recorder::for_: n must fit in a u32 cell");
  if (!body) throw InvalidArgument("Recorder::for_: body is empty");
  Transaction t(s);
  Value remaining = empty({1}, DType::u32, "for.remaining");
  Value going = empty({1}, DType::u32, "for.going");
  Value stop = empty({1}, DType::u32, "for.break");
  Value skip = empty({1}, DType::u32, "for.continue");
  call(kernels::fill(), {static_cast<double>(n)}, buffer(remaining));
  call(kernels::fill(), {n > 0 ? 1.0 : 0.0}, buffer(going));
  call(kernels::fill(), {0.0}, buffer(stop));
  s.record_loop(
      going,
      [&] {
        call(kernels::fill(), {0.0}, buffer(skip));
        s.loops.push_back({stop, skip, s.open.size()});
        body();
        // Close the guards break_if / continue_if opened, then count the turn.
        s.flush_deferred();
        for (int g = 0; g < s.loops.back().guards; ++g) s.open.pop_back();
        s.loops.pop_back();
        call_all(kernels::loop_next(), {remaining, stop}, buffer(going));
      },
      n, true);
  t.commit();
}

// Sets `flag` |= cell, then opens an if_ arm holding the rest of the body: it runs only while
// neither break nor continue has fired this turn.
void Recording::State::guard_rest_of_loop_body(const Value& flag, const Value& cell,
                                               const char* who) {
  LoopFrame& loop = loops.back();
  if (open.size() != loop.depth + static_cast<std::size_t>(loop.guards))
    throw InvalidArgument(std::string(who) +
                          ": call it directly in the for_ body, not inside a nested construct");
  flush_deferred();
  Recorder r(self);
  r.call(kernels::cell_or(), {flag, cell}, buffer(flag));
  const Value keep = r.call(kernels::cell_none(), {loop.stop, loop.skip});
  NodeInfo guard;
  guard.kind = NodeKind::if_;
  guard.label = std::string(who) + " guard";
  guard.kernel = "if";
  guard.arrays = {arg_info("cond", Access::read, keep.id())};
  guard.bodies.resize(1);
  const Snapshot cond = note_condition(guard.arrays[0]);
  const int id = add_node(std::move(guard), nullptr, KernelImpl{});
  snapshots[static_cast<std::size_t>(id)][0] = cond;
  open.emplace_back(id, 0);
  ++loops.back().guards;
}

void Recorder::break_if(const Value& cell) {
  Recording::State& s = *rec_->s_;
  s.check_open("Recorder::break_if");
  if (s.loops.empty()) throw InvalidArgument("Recorder::break_if: only inside a for_ body");
  Transaction t(s);
  s.guard_rest_of_loop_body(s.loops.back().stop, cell, "Recorder::break_if");
  t.commit();
}

void Recorder::continue_if(const Value& cell) {
  Recording::State& s = *rec_->s_;
  s.check_open("Recorder::continue_if");
  if (s.loops.empty()) throw InvalidArgument("Recorder::continue_if: only inside a for_ body");
  Transaction t(s);
  s.guard_rest_of_loop_body(s.loops.back().skip, cell, "Recorder::continue_if");
  t.commit();
}

void Recorder::if_chain(const std::vector<std::pair<Value, std::function<void()>>>& arms,
                        const std::function<void()>& else_arm) {
  Recording::State& s = *rec_->s_;
  s.check_open("Recorder::if_chain");
  const int n = static_cast<int>(arms.size());
  if (n < 1 || n > kernels::kMaxFirstTrue)
    throw InvalidArgument("Recorder::if_chain: needs 1 to " +
                          std::to_string(kernels::kMaxFirstTrue) + " conditions, got " +
                          std::to_string(n));
  std::vector<Arg> conds;
  std::vector<std::function<void()>> bodies;
  for (const auto& [cell, arm] : arms) {
    conds.emplace_back(cell);
    bodies.push_back(arm);
  }
  if (else_arm) bodies.push_back(else_arm);
  Transaction t(s);
  // One decision at the head: the index of the first true condition (n when none is).
  Value index = call(kernels::first_true(n), conds, CallOptions{{}, "if_chain decision"});
  switch_(index, bodies);
  t.commit();
}

// The item of `list` whose subtree holds node `id`, or -1.
int Recording::State::item_holding(const std::vector<int>& list, int id) const {
  for (int n = id; n >= 0; n = nodes[static_cast<std::size_t>(n)].parent)
    if (std::find(list.begin(), list.end(), n) != list.end()) return n;
  return -1;
}

void Branch::wait(const Value& v) {
  Recording::State& s = *rec_->s_;
  s.check_open("Branch::wait");
  const auto& d = s.value(v, "Branch::wait");
  if (s.open.empty() ||
      s.nodes[static_cast<std::size_t>(s.open.back().first)].kind != NodeKind::fork ||
      s.open.back().second != index_)
    throw InvalidArgument("Branch::wait: call it inside its own branch, outside nested constructs");
  s.flush_deferred();  // the writer to wait for may be a deferred call
  const int fork = s.open.back().first;
  const int64_t begin = d.byte_offset,
                end = d.byte_offset + view_span_bytes(d.shape, d.strides, d.dtype);
  // The last node recorded so far that wrote the value, among the nodes viewing its buffer.
  int writer = -1;
  for (int id : s.nodes_of_buffer[static_cast<std::size_t>(d.buffer)]) {
    const NodeInfo& n = s.nodes[static_cast<std::size_t>(id)];
    if (is_control(n.kind)) continue;
    for (const NodeArgInfo& a : n.arrays)
      if (a.buffer == d.buffer && writes(a.access) &&
          overlaps(a.byte_offset, a.byte_offset + a.bytes, begin, end))
        writer = std::max(writer, n.id);
  }
  if (writer < 0)
    throw RecordError("Branch::wait: no earlier node writes array '" +
                      s.buffers[static_cast<std::size_t>(d.buffer)].label +
                      "'; there is nothing to wait for");
  for (int b = 0; b < index_; ++b) {
    const int item = s.item_holding(
        s.nodes[static_cast<std::size_t>(fork)].bodies[static_cast<std::size_t>(b)], writer);
    if (item >= 0) s.pending_waits.push_back(item);
  }
  // A writer before the fork or in this branch is already ordered: nothing to add.
}

void Recorder::parallel(const std::vector<std::function<void(Branch&)>>& branches) {
  Recording::State& s = *rec_->s_;
  s.check_open("Recorder::parallel");
  if (branches.empty()) throw InvalidArgument("Recorder::parallel: needs at least one branch");
  for (std::size_t i = 0; i < branches.size(); ++i)
    if (!branches[i])
      throw InvalidArgument("Recorder::parallel: branch " + std::to_string(i) + " is empty");
  Transaction t(s);
  NodeInfo node;
  node.kind = NodeKind::fork;
  node.label = "parallel";
  node.kernel = "parallel";
  node.bodies.resize(branches.size());
  s.flush_deferred();
  const int id = s.add_node(std::move(node), nullptr, KernelImpl{});
  for (std::size_t i = 0; i < branches.size(); ++i) {
    s.open.emplace_back(id, static_cast<int>(i));
    s.pending_waits.clear();
    Branch b(rec_, static_cast<int>(i));
    branches[i](b);
    s.flush_deferred();
    s.pending_waits.clear();  // a wait with nothing after it orders nothing
    s.open.pop_back();
  }
  s.check_fork_races(id);
  t.commit();
}

}  // namespace eagle
