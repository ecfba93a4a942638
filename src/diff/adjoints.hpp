// Internal: the cotangents of a forward's arrays while the reverse pass walks back, one per
// forward buffer, addressed by the views the forward's nodes used. Zero until something flows
// in; a whole-buffer contribution is kept as is (no copy), a partial one accumulates in place
// into a zero-filled array the pass owns.
#pragma once

#include <map>
#include <optional>
#include <set>

#include "eagle/graph/recording.hpp"

namespace eagle::diff::detail {

class Adjoints {
 public:
  Adjoints(Recorder& r, std::vector<BufferInfo> forward_buffers)
      : r_(r), buffers_(std::move(forward_buffers)) {}
  // The cotangent of what view `v` holds now (nullopt: zero).
  std::optional<Value> read(const NodeArgInfo& v);
  // What `v` held is overwritten (walking back: before the writer, its old contents got nothing).
  void zero(const NodeArgInfo& v);
  // Adds `c` (v's shape and dtype, contiguous) to the cotangent of `v`.
  void add(const NodeArgInfo& v, const Value& c);
  // Whether `v` views an array this pass updates in place (a contribution passed through from it
  // must be copied before it is kept elsewhere).
  bool owns(const Value& v) const { return owned_.count(v.buffer()) != 0; }
  // Gives forward buffer `b` an array of its own, updated in place from now on (zero-filled,
  // or a copy of its cotangent): inside a device construct's reverse, which arm runs (or how
  // many turns) is known on the device only, so the cotangent must stay one array throughout.
  void pin(int b);
  bool has(int b) const { return entries_.count(b) != 0; }
  // The whole cotangent array of forward buffer `b` (nullopt: zero).
  std::optional<Value> array_of(int b) const {
    auto it = entries_.find(b);
    return it == entries_.end() ? std::nullopt : it->second.value;
  }
  // Back to keeping whole contributions as they are (after the construct).
  void unpin_all() { pinned_.clear(); }

 private:
  struct Entry {
    std::optional<Value> value;  // the whole buffer's cotangent, contiguous
    bool owned = false;          // an array made here, updated in place
    // Zero-filled by own() and written since only where `written` lies: a contribution to a
    // view disjoint from those is stored, not added (one copy or scatter instead of a gather,
    // an add and a scatter for a strided 16-bit view). False once anything else is known.
    bool zero_elsewhere = false;
    std::vector<NodeArgInfo> written;
  };
  bool whole(const NodeArgInfo& v) const;
  // A derivative that wrote the cotangent of view v into view c of an array of its own, laid out
  // as v's buffer and zero elsewhere: that array becomes the buffer's cotangent (when it has none
  // yet), or c already lies in it. False when c is anything else.
  bool adopt(const NodeArgInfo& v, const Value& c);
  bool written_once_laid_out(int buffer) const;
  // Whether view `v` of entry `e` still holds the zeros own() filled it with.
  bool still_zero(const Entry& e, const NodeArgInfo& v) const;
  Value part(const Entry& e, const NodeArgInfo& v);
  void own(int b_id, Entry& e);
  Recorder& r_;
  std::vector<BufferInfo> buffers_;
  std::map<int, Entry> entries_;
  std::set<int> owned_;   // buffers of the recording recorded into
  std::set<int> pinned_;  // forward buffers updated in place only
};

}  // namespace eagle::diff::detail
