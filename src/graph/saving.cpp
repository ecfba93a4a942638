// RecordOptions::record: before a node overwrites in place an array that a derivative reads (of
// an earlier node, or the node's own input), a `save` node copies it and the reverse pass reads
// the copy; and the name map, made when the recording is finished.
#include <algorithm>

#include "eagle/core/error.hpp"
#include "eagle/core/shape.hpp"
#include "eagle/graph/derivative.hpp"
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

}  // namespace

void Recording::State::set_snapshot(int node, int slot, Snapshot snap) {
  Snapshot& at = snapshots[static_cast<std::size_t>(node)][static_cast<std::size_t>(slot)];
  journal.push_back(Undo{Undo::Kind::snapshot, node, slot, 0, 0, snapshot_undo.size()});
  snapshot_undo.push_back(at);
  at = std::move(snap);
}

std::vector<Snapshot> Recording::State::save_overwritten(const NodeInfo& node,
                                                         const Kernel& kernel) {
  std::vector<Snapshot> own(node.arrays.size());
  if (!options.record) return own;
  for (const NodeArgInfo& w : node.arrays) {
    if (!writes(w.access)) continue;
    const int64_t w_lo = w.byte_offset, w_hi = w.byte_offset + w.bytes;
    auto overlaps_w = [&](const NodeArgInfo& a) {
      return a.buffer == w.buffer && overlaps(a.byte_offset, a.byte_offset + a.bytes, w_lo, w_hi);
    };
    std::vector<Need> needs;
    for (int id : nodes_of_buffer[static_cast<std::size_t>(w.buffer)]) {
      const NodeInfo& n = nodes[static_cast<std::size_t>(id)];
      if (n.kind != NodeKind::kernel || n.parent >= 0) continue;  // constructs: not reversed yet
      for (std::size_t k = 0; k < n.arrays.size(); ++k) {
        const Snapshot& snap = snapshots[static_cast<std::size_t>(id)][k];
        if (snap.state != Snapshot::State::intact || !overlaps_w(n.arrays[k]) ||
            !read_by_derivative(kernels[static_cast<std::size_t>(id)].get(), static_cast<int>(k)))
          continue;
        needs.push_back({id, static_cast<int>(k), n.arrays[k]});
      }
    }
    for (std::size_t k = 0; k < node.arrays.size(); ++k)
      if (reads(node.arrays[k].access) && own[k].state == Snapshot::State::intact &&
          overlaps_w(node.arrays[k]) && read_by_derivative(&kernel, static_cast<int>(k)))
        needs.push_back({-1, static_cast<int>(k), node.arrays[k]});
    if (needs.empty()) continue;
    const std::string by = node_name(node) + " (kernel " + node.kernel + ")";
    // Not saved: inside a device construct (a save there would run per turn or not at all), or a
    // node whose reverse was recorded already (Recorder::release_saves).
    std::vector<Need> kept;
    for (const Need& need : needs) {
      const bool inside = !open.empty();
      if (!inside && (need.node < 0 || need.node >= save_horizon)) {
        kept.push_back(need);
        continue;
      }
      Snapshot lost{Snapshot::State::lost,
                    {},
                    by + (inside ? " inside a device construct (not saved there yet)"
                                 : " after Recorder::release_saves (its reverse was recorded)")};
      if (need.node < 0) {
        own[static_cast<std::size_t>(need.slot)] = lost;
      } else {
        set_snapshot(need.node, need.slot, lost);
      }
    }
    if (kept.empty()) continue;
    // Save the written view when it is contiguous and holds every needed view; else the buffer.
    bool view_only = w.strides.empty();
    for (const Need& need : kept)
      view_only = view_only && need.arg.byte_offset >= w_lo &&
                  need.arg.byte_offset + need.arg.bytes <= w_hi;
    const BufferInfo src = buffers[static_cast<std::size_t>(w.buffer)];
    const int64_t lo = view_only ? w_lo : 0;
    const Shape shape = view_only ? w.shape : src.shape;
    const int64_t bytes = view_only ? w.bytes : static_cast<int64_t>(src.bytes);
    const int copy = new_buffer(BufferKind::internal, shape, src.dtype,
                                "save#" + std::to_string(nodes.size()) + " " + src.label);
    NodeInfo save;
    save.kind = NodeKind::save;
    save.label = "save " + src.label + " before " + node.label;
    save.kernel = "save";
    save.arrays = {{"src", Access::read, w.buffer, lo, bytes, shape, src.dtype},
                   {"dst", Access::write, copy, 0, bytes, shape, src.dtype}};
    add_node(std::move(save), nullptr, KernelImpl{});
    for (const Need& need : kept) {
      NodeArgInfo at = need.arg;
      at.buffer = copy;
      at.byte_offset -= lo;
      Snapshot snap{Snapshot::State::saved, at, {}};
      if (need.node < 0) {
        own[static_cast<std::size_t>(need.slot)] = snap;
      } else {
        set_snapshot(need.node, need.slot, snap);
      }
    }
  }
  return own;
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

void Recorder::release_saves() {
  Recording::State& s = *rec_->s_;
  s.check_open("Recorder::release_saves");
  s.save_horizon = static_cast<int>(s.nodes.size());
}

}  // namespace eagle
