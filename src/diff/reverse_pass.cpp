// The reverse pass: which nodes lie on a path from wrt to the seeds (forward: what depends on
// wrt; backward: what the seeds depend on, both per buffer, a whole-buffer overwrite ending a
// dependency), then the walk last to first recording each such node's vector-Jacobian product.
#include "diff/reverse_pass.hpp"

#include <algorithm>
#include <functional>
#include <map>

#include "diff/adjoints.hpp"
#include "eagle/core/error.hpp"
#include "eagle/core/shape.hpp"
#include "eagle/graph/derivative.hpp"
#include "eagle/kernel/cells.hpp"
#include "eagle/kernel/standard.hpp"
#include "eagle/kernel/tape.hpp"

namespace eagle::diff::detail {

namespace {

std::string describe(const NodeInfo& n) {
  return "node " + std::to_string(n.id) + " '" + n.label + "' (" +
         (n.kind == NodeKind::kernel ? "kernel " + n.kernel : std::string(node_kind_name(n.kind))) +
         ")";
}

// The scope a node's derivative is recorded in: "d(label)", '/' made '.' (scope names hold none).
std::string derivative_scope(const NodeInfo& n) {
  std::string name = "d(" + (n.label.empty() ? n.kernel : n.label) + ")";
  std::replace(name.begin(), name.end(), '/', '.');
  return name;
}

void accesses(const std::vector<NodeInfo>& nodes, int id, std::vector<NodeArgInfo>& out) {
  const NodeInfo& n = nodes[static_cast<std::size_t>(id)];
  out.insert(out.end(), n.arrays.begin(), n.arrays.end());
  for (const auto& body : n.bodies)
    for (int child : body) accesses(nodes, child, out);
}

bool whole(const NodeArgInfo& a, const std::vector<BufferInfo>& buffers) {
  return a.byte_offset == 0 && a.strides.empty() &&
         a.bytes == static_cast<int64_t>(buffers[static_cast<std::size_t>(a.buffer)].bytes);
}

bool reads_buffer(const NodeInfo& n, int buffer) {
  for (const NodeArgInfo& a : n.arrays)
    if (a.buffer == buffer && reads(a.access)) return true;
  return false;
}

// A write that replaces every byte of a buffer the node does not read: what the buffer held
// before no longer matters after it.
bool overwrites(const NodeInfo& n, const NodeArgInfo& a, const std::vector<BufferInfo>& buffers) {
  return (n.kind == NodeKind::kernel || n.kind == NodeKind::copy_in) && a.access == Access::write &&
         whole(a, buffers) && !reads_buffer(n, a.buffer);
}

bool no_gradient(const Recording& f, const NodeInfo& n) {
  return n.kind == NodeKind::kernel && f.kernel_of(n.id).def().no_gradient;
}

}  // namespace

int first_writer(const Recording& forward, const std::vector<int>& order, int buffer) {
  const auto& nodes = forward.nodes();
  for (int id : order) {
    if (nodes[static_cast<std::size_t>(id)].kind == NodeKind::save) continue;
    std::vector<NodeArgInfo> acc;
    accesses(nodes, id, acc);
    for (const NodeArgInfo& a : acc)
      if (a.buffer == buffer && writes(a.access)) return id;
  }
  return -1;
}

namespace {

// `to = from` without Value::operator=, which inside a device construct would merge the arrays.
void set(std::optional<Value>& to, const std::optional<Value>& from) {
  to.reset();
  if (from) to.emplace(*from);
}

// One reverse pass: which nodes lie on a path from wrt to the seeds, then the walk.
class Pass {
 public:
  Pass(Recorder& r, const Recording& forward, const std::vector<Target>& wrt, const ViewMap& map,
       const std::string& who)
      : r_(r),
        f_(forward),
        nodes_(forward.nodes()),
        buffers_(forward.buffers()),
        wrt_(wrt),
        map_(map),
        who_(who),
        adj_(r, buffers_),
        varied_(buffers_.size(), 0),
        needed_(buffers_.size(), 0),
        varied_node_(nodes_.size(), 0),
        path_(nodes_.size(), 0),
        touch_(nodes_.size(), 0) {}

  std::vector<Value> run(const std::vector<int>& order, const std::vector<Seed>& seeds) {
    for (std::size_t w = 0; w < wrt_.size(); ++w) {
      if (wrt_[w].start < 0) {
        varied_[static_cast<std::size_t>(wrt_[w].view.buffer)] = 1;
      } else {
        starts_[wrt_[w].start].push_back(w);
      }
    }
    mark_varied(order, false, true);
    for (const Seed& s : seeds) needed_[static_cast<std::size_t>(s.view.buffer)] = 1;
    mark_needed(order, false);
    for (const Seed& s : seeds) adj_.add(s.view, s.cotangent);
    grads_.resize(wrt_.size());
    walk(order, true);
    std::vector<Value> out;
    for (std::size_t w = 0; w < wrt_.size(); ++w) {
      if (wrt_[w].start < 0) set(grads_[w], keep(adj_.read(wrt_[w].view)));
      if (!grads_[w]) {
        const Value zero = r_.empty(wrt_[w].view.shape, wrt_[w].view.dtype);
        r_.call(kernels::fill(), {0.0}, buffer(zero));
        grads_[w].emplace(zero);
      }
      out.push_back(*grads_[w]);
    }
    return out;
  }

 private:
  const NodeInfo& node(int id) const { return nodes_[static_cast<std::size_t>(id)]; }
  // What the forward records for the reverse (saves, tape writes): never differentiated.
  bool bookkeeping(const NodeInfo& n) const {
    return n.kind == NodeKind::save ||
           (n.kind == NodeKind::kernel && f_.kernel_of(n.id) == kernels::tape_write());
  }
  char& varied(int b) { return varied_[static_cast<std::size_t>(b)]; }
  char& needed(int b) { return needed_[static_cast<std::size_t>(b)]; }

  // ---- forward: what depends on wrt. A construct's arms may or may not run (and a loop's
  // turns repeat): inside one nothing is cut by an overwrite, and a loop runs to a fixpoint.
  void mark_varied(const std::vector<int>& list, bool conditional, bool top) {
    for (int id : list) {
      const NodeInfo& n = node(id);
      if (bookkeeping(n)) continue;
      if (n.kind == NodeKind::while_) {
        std::vector<char> before;
        do {
          before = varied_;
          mark_varied(n.bodies[0], true, false);
        } while (before != varied_);
      } else if (n.kind == NodeKind::if_ || n.kind == NodeKind::switch_) {
        for (const auto& arm : n.bodies) mark_varied(arm, true, false);
      } else if (n.kind == NodeKind::fork) {
        for (const auto& branch : n.bodies) mark_varied(branch, conditional, false);
      } else {
        mark_varied_leaf(id, n, conditional);
      }
      if (top) mark_wrt_starts(id);
    }
  }

  // A leaf node: differentiated when it reads a varied floating array; what it writes is then
  // varied, else an unconditional overwrite ends the dependence.
  void mark_varied_leaf(int id, const NodeInfo& n, bool conditional) {
    const auto varied_read = [&](const NodeArgInfo& a) {
      return reads(a.access) && is_floating(a.dtype) && varied(a.buffer);
    };
    bool in = std::any_of(n.arrays.begin(), n.arrays.end(), varied_read) && !no_gradient(f_, n);
    varied_node_[static_cast<std::size_t>(id)] = varied_node_[static_cast<std::size_t>(id)] || in;
    if (in) {
      std::vector<bool>& want = wanted_[id];
      want.resize(n.arrays.size(), false);
      for (std::size_t k = 0; k < n.arrays.size(); ++k)
        want[k] = want[k] || varied_read(n.arrays[k]);
    }
    for (const NodeArgInfo& a : n.arrays) {
      if (!writes(a.access) || !is_floating(a.dtype)) continue;
      if (in)
        varied(a.buffer) = 1;
      else if (!conditional && overwrites(n, a, buffers_))
        varied(a.buffer) = 0;
    }
  }

  // The wrt arrays whose values start at top-level node `id` are varied from there on.
  void mark_wrt_starts(int id) {
    const auto it = starts_.find(id);
    if (it == starts_.end()) return;
    for (std::size_t w : it->second) varied(wrt_[w].view.buffer) = 1;
  }

  // ---- backward: what the seeds depend on; path_ (differentiated) and touch_ (writes a
  // needed array: its reverse at least clears cotangents) per node, a construct's from its body.
  void mark_needed(const std::vector<int>& list, bool conditional) {
    for (auto it = list.rbegin(); it != list.rend(); ++it) {
      const int id = *it;
      const NodeInfo& n = node(id);
      if (bookkeeping(n)) continue;
      if (n.kind == NodeKind::while_) {
        std::vector<char> before;
        do {
          before = needed_;
          mark_needed(n.bodies[0], true);
        } while (before != needed_);
      } else if (n.kind == NodeKind::if_ || n.kind == NodeKind::switch_) {
        for (const auto& arm : n.bodies) mark_needed(arm, true);
      } else if (n.kind == NodeKind::fork) {
        for (auto b = n.bodies.rbegin(); b != n.bodies.rend(); ++b) mark_needed(*b, conditional);
      } else {
        mark_needed_leaf(id, n, conditional);
        continue;
      }
      absorb_bodies(id, n);
    }
  }

  // A leaf node: on the path when it writes a needed floating array (and reads a varied one);
  // an unconditional overwrite ends the need, and what it reads is needed when it is on it.
  void mark_needed_leaf(int id, const NodeInfo& n, bool conditional) {
    bool out = false;
    for (const NodeArgInfo& a : n.arrays)
      out = out || (writes(a.access) && is_floating(a.dtype) && needed(a.buffer));
    touch_[static_cast<std::size_t>(id)] |= out;
    path_[static_cast<std::size_t>(id)] |= out && varied_node_[static_cast<std::size_t>(id)];
    for (const NodeArgInfo& a : n.arrays)
      if (writes(a.access) && !conditional && overwrites(n, a, buffers_)) needed(a.buffer) = 0;
    if (!out || no_gradient(f_, n)) return;
    for (const NodeArgInfo& a : n.arrays)
      if (reads(a.access) && is_floating(a.dtype)) needed(a.buffer) = 1;
  }

  // A construct is on the path (touches) when a node of its bodies is.
  void absorb_bodies(int id, const NodeInfo& n) {
    for (const auto& body : n.bodies)
      for (int child : body) {
        path_[static_cast<std::size_t>(id)] |= path_[static_cast<std::size_t>(child)];
        touch_[static_cast<std::size_t>(id)] |= touch_[static_cast<std::size_t>(child)];
      }
  }

  std::optional<Value> keep(std::optional<Value> g) {
    if (g && adj_.owns(*g)) return r_.call(kernels::copy(), {*g});
    return g;
  }

  void zero_written(const NodeInfo& n) {
    for (const NodeArgInfo& a : n.arrays)
      if (writes(a.access) && is_floating(a.dtype)) adj_.zero(a);
  }

  // What the reverse reads of argument `slot` of node `id`: its view, the saved copy, or this
  // turn's row of its tape.
  Value argument(int id, int slot) {
    const NodeInfo& n = node(id);
    const NodeArgInfo& a = n.arrays[static_cast<std::size_t>(slot)];
    const Snapshot& snap = f_.snapshot(id, slot);
    switch (snap.state) {
      case Snapshot::State::intact:
        return map_(a);
      case Snapshot::State::saved:
        return map_(snap.saved);
      case Snapshot::State::taped:
        return r_.call(kernels::tape_read(), {map_(snap.saved), row(snap.saved, n)});
      case Snapshot::State::lost:
        break;
    }
    throw RecordError(who_ + ": the derivative of " + describe(n) + " reads its argument '" +
                      a.param + "', which " + snap.lost_to +
                      " overwrote; take every gradient in one call, or write the new value to "
                      "another array");
  }

  void walk(const std::vector<int>& list, bool top) {
    for (auto it = list.rbegin(); it != list.rend(); ++it) {
      const int id = *it;
      const NodeInfo& n = node(id);
      if (top)
        if (auto s = starts_.find(id); s != starts_.end())
          for (std::size_t w : s->second) set(grads_[w], keep(adj_.read(wrt_[w].view)));
      if (bookkeeping(n)) continue;
      const bool path = path_[static_cast<std::size_t>(id)];
      if (is_control(n.kind)) {
        if (path || touch_[static_cast<std::size_t>(id)]) reverse_construct(id);
        continue;
      }
      if (!path) {
        zero_written(n);
        continue;
      }
      if (n.kind == NodeKind::copy_in) {  // dst = src
        const std::optional<Value> g = keep(adj_.read(n.arrays[1]));
        adj_.zero(n.arrays[1]);
        if (g) adj_.add(n.arrays[0], *g);
        continue;
      }
      reverse_kernel(id);
    }
  }

  void reverse_kernel(int id) {
    const NodeInfo& n = node(id);
    const VjpRule* rule = derivative_of(f_.kernel_of(id));
    if (!rule)
      throw NotSupported(who_ + ": " + describe(n) +
                         " lies on a path from wrt to the seeds and has no derivative; give the "
                         "kernel one (KernelDef::derivative = vjp_rule(...)) or keep it off the "
                         "path");
    VjpArgs args;
    args.scalars = n.scalars;
    args.wanted = wanted_.at(id);
    bool any = false;
    for (std::size_t k = 0; k < n.arrays.size(); ++k) {
      const NodeArgInfo& a = n.arrays[k];
      args.cotangents.push_back(writes(a.access) && is_floating(a.dtype) ? adj_.read(a)
                                                                         : std::nullopt);
      any = any || args.cotangents.back().has_value();
    }
    if (!any) return;  // nothing flows back through it
    for (std::size_t k = 0; k < n.arrays.size(); ++k)
      args.arrays.push_back(rule->reads(static_cast<int>(k)) ? argument(id, static_cast<int>(k))
                                                             : map_(n.arrays[k]));
    std::vector<std::optional<Value>> contrib;
    try {
      // The derivative's nodes are scoped by the node they differentiate ("d(l0.attention)"),
      // so to_json and traces tell one backward from another.
      const auto scope = r_.scope(derivative_scope(n));
      contrib = rule->vjp(r_, args);
    } catch (const NotSupported& e) {  // a rule refusing a case it does not cover
      throw NotSupported(who_ + ": the derivative of " + describe(n) + ": " + e.what());
    }
    if (contrib.size() != n.arrays.size())
      throw InvalidArgument(who_ + ": the derivative of kernel " + n.kernel + " returned " +
                            std::to_string(contrib.size()) + " entries for " +
                            std::to_string(n.arrays.size()) + " array parameters");
    for (std::size_t k = 0; k < n.arrays.size(); ++k) {
      std::optional<Value>& c = contrib[k];
      if (!c || !args.wanted[k]) {
        c.reset();
        continue;
      }
      const NodeArgInfo& a = n.arrays[k];
      if (c->shape() != a.shape || c->dtype() != a.dtype)
        throw InvalidArgument(who_ + ": the derivative of kernel " + n.kernel + " returned " +
                              std::string(dtype_name(c->dtype())) + shape_str(c->shape()) +
                              " for '" + a.param + "', which is " +
                              std::string(dtype_name(a.dtype)) + shape_str(a.shape));
      set(c, keep(c));
    }
    zero_written(n);
    for (std::size_t k = 0; k < n.arrays.size(); ++k)
      if (contrib[k]) adj_.add(n.arrays[k], *contrib[k]);
  }

  // Cotangents a construct's reverse updates stay one array each throughout it (Adjoints::pin):
  // what its path nodes read, and what its nodes write that has a cotangent already.
  void pin_for(int id) {
    std::vector<int> stack{id};
    while (!stack.empty()) {
      const NodeInfo& n = node(stack.back());
      stack.pop_back();
      for (const auto& body : n.bodies) stack.insert(stack.end(), body.begin(), body.end());
      if (is_control(n.kind) || bookkeeping(n)) continue;
      for (const NodeArgInfo& a : n.arrays) {
        if (!is_floating(a.dtype)) continue;
        if ((reads(a.access) && path_[static_cast<std::size_t>(n.id)]) ||
            (writes(a.access) && adj_.has(a.buffer)))
          adj_.pin(a.buffer);
      }
    }
  }

  void reverse_construct(int id) {
    const NodeInfo& n = node(id);
    if (n.kind == NodeKind::fork) return reverse_fork(n);
    if (n.kind == NodeKind::while_) {
      if (n.max_turns == 0) return;  // for_(0, ...): never runs
      if (n.turns < 0 || (!loops_.empty() && n.turns_tape < 0))
        throw NotSupported(
            who_ + ": " + describe(n) +
            " lies on a path from wrt to the seeds and has no turn cap, so its per-turn tape "
            "cannot be sized; give it (and every loop it is in) one: r.while_(cell, body, "
            "max_turns) (or use r.for_(n, body) with break_if)");
    }
    const bool outermost = depth_ == 0;
    if (outermost) pin_for(id);
    ++depth_;
    if (n.kind == NodeKind::while_) {
      reverse_loop(n);
    } else {
      const Value cond = argument(id, 0);
      std::vector<std::function<void()>> arms;
      for (const auto& arm : n.bodies) arms.push_back([this, &arm] { walk(arm, false); });
      if (n.kind == NodeKind::if_) {
        r_.if_(cond, arms[0], arms.size() > 1 ? arms[1] : nullptr);
      } else {
        r_.switch_(cond, arms);
      }
    }
    --depth_;
    if (outermost) adj_.unpin_all();
  }

  // The floating forward buffers the reverse of node `id` touches that have a cotangent array.
  std::vector<int> cotangents_of(int id) {
    std::vector<int> out, stack{id};
    while (!stack.empty()) {
      const NodeInfo& n = node(stack.back());
      stack.pop_back();
      for (const auto& body : n.bodies) stack.insert(stack.end(), body.begin(), body.end());
      if (is_control(n.kind) || bookkeeping(n)) continue;
      for (const NodeArgInfo& a : n.arrays)
        if (is_floating(a.dtype) && adj_.has(a.buffer) &&
            std::find(out.begin(), out.end(), a.buffer) == out.end())
          out.push_back(a.buffer);
    }
    return out;
  }

  // A fork reverses as a fork: reversed branch k is forward branch n-1-k walked back (a forward
  // wait of branch j on branch i < j becomes, reversed, one of branch n-1-i on branch n-1-j).
  // Every cotangent the fork touches is one array (pinned), and each reversed item first waits
  // for the last writer of each cotangent it touches, which orders the accumulations branches
  // share. Should the recorder still find a race, the branches are reversed one after another.
  void reverse_fork(const NodeInfo& n) {
    const bool outermost = depth_ == 0;
    if (outermost) pin_for(n.id);
    ++depth_;
    const int depth = depth_;
    const std::size_t loops = loops_.size();
    try {
      r_.atomically([&] {
        std::vector<std::function<void(Branch&)>> branches;
        for (auto b = n.bodies.rbegin(); b != n.bodies.rend(); ++b)
          branches.push_back([this, &list = *b](Branch& branch) {
            for (auto it = list.rbegin(); it != list.rend(); ++it) {
              for (int buffer : cotangents_of(*it)) branch.wait(*adj_.array_of(buffer));
              walk({*it}, false);
            }
          });
        r_.parallel(branches);
      });
    } catch (const RecordError&) {
      depth_ = depth;
      loops_.resize(loops);
      for (auto b = n.bodies.rbegin(); b != n.bodies.rend(); ++b) walk(*b, false);
    }
    --depth_;
    if (outermost) adj_.unpin_all();
  }

  NodeArgInfo whole(int buffer) const {
    const BufferInfo& b = buffers_[static_cast<std::size_t>(buffer)];
    return {b.label, Access::read, b.id, 0, static_cast<int64_t>(b.bytes), b.shape, b.dtype};
  }

  // The row of tape `tape` for the turn being reversed: the innermost loop whose tapes have as
  // many rows (a loop's tapes have a row per turn of it and of its enclosing loops).
  Value row(const NodeArgInfo& tape, const NodeInfo& reader) {
    for (auto it = loops_.rbegin(); it != loops_.rend(); ++it)
      if (it->rows == tape.shape[0]) return it->index;
    throw RecordError(who_ + ": " + describe(reader) + " reads a tape outside its loop's reverse");
  }

  // The turns the forward ran (its turn counter; inside a loop, this turn's row of its tape of
  // turn counts), last to first: k counts down, and each turn reads its row of the tapes (k, or
  // inside a loop, the enclosing row * cap + k).
  void reverse_loop(const NodeInfo& n) {
    const bool nested = !loops_.empty();
    const Value count =
        nested ? r_.call(kernels::tape_read(), {map_(whole(n.turns_tape)), loops_.back().index})
               : map_(whole(n.turns));
    const Value k = r_.call(kernels::copy(), {count});
    const Value going = r_.call(kernels::cell_or(), {k, k});
    const Value no_stop = r_.empty({1}, DType::u32);
    r_.call(kernels::fill(), {0.0}, buffer(no_stop));
    const int64_t rows = (nested ? loops_.back().rows : 1) * n.max_turns;
    std::optional<Value> cap;
    if (nested) {
      cap.emplace(r_.empty({1}, DType::u32));
      r_.call(kernels::fill(), {static_cast<double>(n.max_turns)}, buffer(*cap));
    }
    r_.while_(going, [&] {
      r_.call_all(kernels::loop_next(), {k, no_stop}, buffer(going));  // k -= 1: this turn
      const Value index = nested ? r_.call(kernels::cell_mad(), {loops_.back().index, *cap, k}) : k;
      loops_.push_back({index, rows});
      walk(n.bodies[0], false);
      loops_.pop_back();
    });
  }

  Recorder& r_;
  const Recording& f_;
  // Copies: when recording into the forward's own recording, its vectors grow as we record.
  const std::vector<NodeInfo> nodes_;
  const std::vector<BufferInfo> buffers_;
  const std::vector<Target>& wrt_;
  const ViewMap& map_;
  const std::string& who_;
  Adjoints adj_;
  std::vector<char> varied_, needed_, varied_node_, path_, touch_;
  std::map<int, std::vector<std::size_t>> starts_;  // node -> wrt entries it writes first
  std::map<int, std::vector<bool>> wanted_;         // per kernel node on the forward path
  std::vector<std::optional<Value>> grads_;
  struct Level {
    Value index;   // the row of the turn being reversed
    int64_t rows;  // rows of the tapes of the loop
  };
  std::vector<Level> loops_;  // the loops whose reverse is open, outermost first
  int depth_ = 0;             // device constructs open in the reverse
};

}  // namespace

std::vector<Value> record_reverse(Recorder& r, const Recording& forward,
                                  const std::vector<int>& order, const std::vector<Seed>& seeds,
                                  const std::vector<Target>& wrt, const ViewMap& map,
                                  const std::string& who) {
  return Pass(r, forward, wrt, map, who).run(order, seeds);
}

}  // namespace eagle::diff::detail
