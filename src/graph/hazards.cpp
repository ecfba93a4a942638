// Hazards: races within a node and between fork branches are refused; edges come from the
// accesses of each list in program order. Accesses are kept per buffer in an interval index, so
// a fan-out of readers or a row of disjoint slices costs near-linear time, not quadratic.
#include <algorithm>
#include <map>
#include <unordered_map>

#include "eagle/core/error.hpp"
#include "graph/state.hpp"
#include "graph/view_layout.hpp"

namespace eagle {

namespace {

struct Span {
  int node;  // the item (or branch position) the access belongs to
  int64_t begin, end;
  detail::ViewLayout layout;  // which bytes of [begin, end) it touches
};

Span span_of(int node, const NodeArgInfo& a) {
  return {node, a.byte_offset, a.byte_offset + a.bytes, detail::view_layout(a)};
}

// Whether span s and access a (its layout la) share a byte (overlapping ranges may not: column
// slices).
bool shares_bytes(const Span& s, const NodeArgInfo& a, detail::ViewLayout la) {
  return !detail::views_apart(s.begin, s.end - s.begin, s.layout, a.byte_offset, a.bytes, la);
}

// The accesses of one buffer, by where they begin. max_len bounds how far before a query an
// overlapping access can begin.
class IntervalIndex {
 public:
  template <class F>
  void for_overlapping(int64_t begin, int64_t end, F&& f) const {
    for (auto it = by_begin_.lower_bound(begin - max_len_);
         it != by_begin_.end() && it->first < end; ++it)
      if (it->second.end > begin) f(it->second);
  }
  // Drops the accesses lying entirely in [begin, end).
  void erase_within(int64_t begin, int64_t end) {
    for (auto it = by_begin_.lower_bound(begin); it != by_begin_.end() && it->first < end;)
      it = it->second.end <= end ? by_begin_.erase(it) : std::next(it);
  }
  void add(const Span& s) {
    by_begin_.emplace(s.begin, s);
    max_len_ = std::max(max_len_, s.end - s.begin);
  }

 private:
  std::multimap<int64_t, Span> by_begin_;
  int64_t max_len_ = 0;
};

struct BufferAccesses {
  IntervalIndex reads, writes;
};

}  // namespace

// Every access a node makes, its whole body included: what orders it in its own list.
void Recording::State::subtree_accesses(int id, std::vector<NodeArgInfo>& out) const {
  const NodeInfo& n = nodes[static_cast<std::size_t>(id)];
  out.insert(out.end(), n.arrays.begin(), n.arrays.end());
  for (const auto& body : n.bodies)
    for (int child : body) subtree_accesses(child, out);
}

// Within one node, a written argument may overlap another only as the very same view of a
// per-sample kernel (an in-place update); anything else is a race between the kernel's threads.
void Recording::State::check_races(const NodeInfo& node, bool per_sample) const {
  for (std::size_t i = 0; i < node.arrays.size(); ++i) {
    for (std::size_t j = i + 1; j < node.arrays.size(); ++j) {
      const NodeArgInfo& a = node.arrays[i];
      const NodeArgInfo& b = node.arrays[j];
      if (a.buffer != b.buffer || !(writes(a.access) || writes(b.access))) continue;
      if (detail::views_apart(a, b)) continue;
      const bool same_view = a.byte_offset == b.byte_offset && a.shape == b.shape &&
                             a.strides == b.strides && a.dtype == b.dtype;
      if (same_view && per_sample && !(writes(a.access) && writes(b.access))) continue;
      throw RecordError(
          "race refused: " + node_name(node) + " passes overlapping views of array '" +
          buffers[static_cast<std::size_t>(a.buffer)].label + "' as '" + a.param + "' (" +
          std::string(access_name(a.access)) + ") and '" + b.param + "' (" +
          std::string(access_name(b.access)) + ")" +
          (same_view ? "; only a per-sample kernel may update an array in place"
                     : "; a kernel may write in place only over exactly the same view"));
    }
  }
}

namespace {

// One fork branch's items: their accesses (whole subtrees), indexed per buffer and kind, and
// each item's position.
struct BranchAccesses {
  std::vector<std::vector<NodeArgInfo>> items;
  std::unordered_map<int, BufferAccesses> index;
  std::unordered_map<int, int> position;  // item node id -> position in the branch
};

// The first item of branch `i` (by position, after `waited`) whose access clashes with `a`
// (overlapping bytes, one of them writing), or -1.
int first_clash(const BranchAccesses& i, const NodeArgInfo& a, int waited) {
  auto found = i.index.find(a.buffer);
  if (found == i.index.end()) return -1;
  int clash = -1;
  const detail::ViewLayout la = detail::view_layout(a);  // once, not per overlapping span
  auto note = [&](const Span& s) {
    if (s.node > waited && (clash < 0 || s.node < clash) && shares_bytes(s, a, la)) clash = s.node;
  };
  const int64_t begin = a.byte_offset, end = a.byte_offset + a.bytes;
  found->second.writes.for_overlapping(begin, end, note);
  if (writes(a.access)) found->second.reads.for_overlapping(begin, end, note);
  return clash;
}

// Each branch's accesses, indexed once for all the pairs of branches.
std::vector<BranchAccesses> branch_accesses(const Recording::State& s, int fork) {
  const auto& branches = s.nodes[static_cast<std::size_t>(fork)].bodies;
  std::vector<BranchAccesses> by_branch(branches.size());
  for (std::size_t b = 0; b < branches.size(); ++b) {
    BranchAccesses& ba = by_branch[b];
    for (std::size_t x = 0; x < branches[b].size(); ++x) {
      ba.position[branches[b][x]] = static_cast<int>(x);
      auto& acc = ba.items.emplace_back();
      s.subtree_accesses(branches[b][x], acc);
      for (const NodeArgInfo& a : acc) {
        BufferAccesses& on = ba.index[a.buffer];
        (writes(a.access) ? on.writes : on.reads).add(span_of(static_cast<int>(x), a));
      }
    }
  }
  return by_branch;
}

}  // namespace

// Branches run concurrently: two of them touching the same bytes, one writing, must be ordered
// by a wait: item y of branch j is ordered after item x of branch i when some item at or before
// y waits on an item of branch i at or after x.
void Recording::State::check_fork_races(int fork) const {
  const auto& branches = nodes[static_cast<std::size_t>(fork)].bodies;
  // Calls that must run in recording order (KernelDef::order_key) in two concurrent branches.
  std::unordered_map<const void*, std::pair<std::size_t, int>> keyed;  // key -> branch, item
  std::vector<const void*> keys;
  for (std::size_t b = 0; b < branches.size(); ++b)
    for (int item : branches[b]) {
      keys.clear();
      subtree_order_keys(item, keys);
      for (const void* key : keys) {
        auto [it, first] = keyed.try_emplace(key, b, item);
        if (first || it->second.first == b) continue;
        throw RecordError(
            "order refused: " + node_name(nodes[static_cast<std::size_t>(it->second.second)]) +
            " (branch " + std::to_string(it->second.first) + ") and " +
            node_name(nodes[static_cast<std::size_t>(item)]) + " (branch " + std::to_string(b) +
            ") hold calls that must run in recording order (kernels sharing an order key, such "
            "as one communicator's collectives), but fork branches run concurrently; record "
            "them in one branch or outside the fork");
      }
    }
  const std::vector<BranchAccesses> by_branch = branch_accesses(*this, fork);
  for (std::size_t j = 0; j < branches.size(); ++j) {
    for (std::size_t i = 0; i < j; ++i) {
      int waited = -1;  // the furthest item of branch i waited on so far in branch j
      for (std::size_t y = 0; y < branches[j].size(); ++y) {
        for (int w : nodes[static_cast<std::size_t>(branches[j][y])].waits) {
          auto it = by_branch[i].position.find(w);
          if (it != by_branch[i].position.end()) waited = std::max(waited, it->second);
        }
        for (const NodeArgInfo& a : by_branch[j].items[y]) {
          const int clash = first_clash(by_branch[i], a, waited);
          if (clash < 0) continue;
          throw RecordError(
              "race refused: " + node_name(nodes[static_cast<std::size_t>(branches[i][clash])]) +
              " (branch " + std::to_string(i) + ") and " +
              node_name(nodes[static_cast<std::size_t>(branches[j][y])]) + " (branch " +
              std::to_string(j) + ") both access array '" +
              buffers[static_cast<std::size_t>(a.buffer)].label +
              "' and one writes it, with no order between them; add "
              "Branch::wait on the array in branch " +
              std::to_string(j));
        }
      }
    }
  }
}

namespace {

// The earlier items of a list one item's accesses must follow (ascending, once each).
std::vector<int> ordering_deps(const std::unordered_map<int, BufferAccesses>& live,
                               const std::vector<NodeArgInfo>& acc, int id,
                               std::vector<int>& deps) {
  deps.clear();
  for (const NodeArgInfo& a : acc) {
    auto it = live.find(a.buffer);
    if (it == live.end()) continue;
    const int64_t begin = a.byte_offset, end = a.byte_offset + a.bytes;
    const detail::ViewLayout la = detail::view_layout(a);  // once, not per overlapping span
    auto add = [&](const Span& s) {
      if (s.node != id && shares_bytes(s, a, la)) deps.push_back(s.node);
    };
    it->second.writes.for_overlapping(begin, end, add);
    if (writes(a.access)) it->second.reads.for_overlapping(begin, end, add);
  }
  std::sort(deps.begin(), deps.end());
  deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
  return deps;
}

// Records an item's accesses. Accesses an unconditional write covers are ordered before it, so
// later items need only it: they are dropped. Only a write of every byte of its range covers
// what lies there (a strided write may leave out bytes a column slice beside it uses).
void note_accesses(std::unordered_map<int, BufferAccesses>& live,
                   const std::vector<NodeArgInfo>& acc, int id, bool unconditional) {
  for (const NodeArgInfo& a : acc) {
    BufferAccesses& ba = live[a.buffer];
    const Span s = span_of(id, a);
    if (writes(a.access) && unconditional && s.layout.period == 0 && s.layout.run >= 0) {
      ba.reads.erase_within(s.begin, s.end);
      ba.writes.erase_within(s.begin, s.end);
    }
    (writes(a.access) ? ba.writes : ba.reads).add(s);
  }
}

}  // namespace

void Recording::State::subtree_order_keys(int id, std::vector<const void*>& out) const {
  const auto& kernel = kernels[static_cast<std::size_t>(id)];
  if (kernel && kernel->def().order_key &&
      std::find(out.begin(), out.end(), kernel->def().order_key) == out.end())
    out.push_back(kernel->def().order_key);
  for (const auto& body : nodes[static_cast<std::size_t>(id)].bodies)
    for (int child : body) subtree_order_keys(child, out);
}

// Edges from accesses in program order within one list (the top level or one arm):
// read-after-write, write-after-read and write-after-write on overlapping byte ranges of the
// same buffer. A control node counts with every access of its bodies. And an edge from each
// item holding a kernel with an order key to the last earlier item holding the same key.
void Recording::State::infer_edges(std::vector<int>& list) {
  std::unordered_map<int, BufferAccesses> live;
  std::unordered_map<const void*, int> last_keyed;
  std::vector<NodeArgInfo> acc;
  std::vector<const void*> keys;
  std::vector<int> deps;
  for (int id : list) {
    acc.clear();
    subtree_accesses(id, acc);
    NodeInfo& node = nodes[static_cast<std::size_t>(id)];
    node.deps = ordering_deps(live, acc, id, deps);
    note_accesses(live, acc, id, !is_control(node.kind));
    keys.clear();
    subtree_order_keys(id, keys);
    for (const void* key : keys) {
      auto [it, first] = last_keyed.try_emplace(key, id);
      if (first) continue;
      if (std::find(node.deps.begin(), node.deps.end(), it->second) == node.deps.end()) {
        node.deps.push_back(it->second);
        std::sort(node.deps.begin(), node.deps.end());
      }
      it->second = id;
    }
    for (auto& body : node.bodies) {
      if (node.kind != NodeKind::fork) {
        infer_edges(body);
        continue;
      }
      // A fork's branch runs its items in order: each waits for the one before it.
      for (std::size_t k = 0; k < body.size(); ++k) {
        NodeInfo& item = nodes[static_cast<std::size_t>(body[k])];
        item.deps.clear();
        if (k > 0) item.deps.push_back(body[k - 1]);
        for (auto& inner : item.bodies) infer_edges(inner);
      }
    }
  }
}

}  // namespace eagle
