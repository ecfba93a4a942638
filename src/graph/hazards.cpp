// Hazards: races within a node and between fork branches are refused; edges come from the
// accesses of each list in program order. Accesses are kept per buffer in an interval index, so
// a fan-out of readers or a row of disjoint slices costs near-linear time, not quadratic.
#include <algorithm>
#include <map>
#include <unordered_map>

#include "eagle/core/error.hpp"
#include "graph/state.hpp"

namespace eagle {

namespace {

struct Span {
  int node;  // the item (or branch position) the access belongs to
  int64_t begin, end;
};

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
      if (!overlaps(a.byte_offset, a.byte_offset + a.bytes, b.byte_offset, b.byte_offset + b.bytes))
        continue;
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

// Branches run concurrently: two of them touching the same bytes, one writing, must be ordered
// by a wait: item y of branch j is ordered after item x of branch i when some item at or before
// y waits on an item of branch i at or after x.
void Recording::State::check_fork_races(int fork) const {
  const auto& branches = nodes[static_cast<std::size_t>(fork)].bodies;
  // Each branch's accesses (item subtrees), indexed per buffer and kind.
  std::vector<std::unordered_map<int, BufferAccesses>> index(branches.size());
  std::vector<std::vector<std::vector<NodeArgInfo>>> accesses(branches.size());
  std::vector<std::unordered_map<int, int>> position(branches.size());  // item id -> position
  for (std::size_t b = 0; b < branches.size(); ++b) {
    for (std::size_t x = 0; x < branches[b].size(); ++x) {
      position[b][branches[b][x]] = static_cast<int>(x);
      auto& acc = accesses[b].emplace_back();
      subtree_accesses(branches[b][x], acc);
      for (const NodeArgInfo& a : acc) {
        BufferAccesses& ba = index[b][a.buffer];
        const Span s{static_cast<int>(x), a.byte_offset, a.byte_offset + a.bytes};
        (writes(a.access) ? ba.writes : ba.reads).add(s);
      }
    }
  }
  for (std::size_t j = 0; j < branches.size(); ++j) {
    for (std::size_t i = 0; i < j; ++i) {
      int waited = -1;  // the furthest item of branch i waited on so far in branch j
      for (std::size_t y = 0; y < branches[j].size(); ++y) {
        for (int w : nodes[static_cast<std::size_t>(branches[j][y])].waits) {
          auto it = position[i].find(w);
          if (it != position[i].end()) waited = std::max(waited, it->second);
        }
        for (const NodeArgInfo& a : accesses[j][y]) {
          auto found = index[i].find(a.buffer);
          if (found == index[i].end()) continue;
          const BufferAccesses& ba = found->second;
          int clash = -1;
          auto note = [&](const Span& s) {
            if (s.node > waited && (clash < 0 || s.node < clash)) clash = s.node;
          };
          ba.writes.for_overlapping(a.byte_offset, a.byte_offset + a.bytes, note);
          if (writes(a.access))
            ba.reads.for_overlapping(a.byte_offset, a.byte_offset + a.bytes, note);
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

// Edges from accesses in program order within one list (the top level or one arm):
// read-after-write, write-after-read and write-after-write on overlapping byte ranges of the
// same buffer. A control node counts with every access of its bodies.
void Recording::State::infer_edges(std::vector<int>& list) {
  std::unordered_map<int, BufferAccesses> live;
  std::vector<NodeArgInfo> acc;
  std::vector<int> deps;
  for (int id : list) {
    acc.clear();
    subtree_accesses(id, acc);
    deps.clear();
    for (const NodeArgInfo& a : acc) {
      auto it = live.find(a.buffer);
      if (it == live.end()) continue;
      const int64_t begin = a.byte_offset, end = a.byte_offset + a.bytes;
      auto add = [&](const Span& s) {
        if (s.node != id) deps.push_back(s.node);
      };
      it->second.writes.for_overlapping(begin, end, add);
      if (writes(a.access)) it->second.reads.for_overlapping(begin, end, add);
    }
    NodeInfo& node = nodes[static_cast<std::size_t>(id)];
    for (const NodeArgInfo& a : acc) {
      BufferAccesses& ba = live[a.buffer];
      const int64_t begin = a.byte_offset, end = a.byte_offset + a.bytes;
      // Accesses an unconditional write covers are ordered before it; later nodes need only it.
      if (writes(a.access) && !is_control(node.kind)) {
        ba.reads.erase_within(begin, end);
        ba.writes.erase_within(begin, end);
      }
      (writes(a.access) ? ba.writes : ba.reads).add({id, begin, end});
    }
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    node.deps = deps;
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
