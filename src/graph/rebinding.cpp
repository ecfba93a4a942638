// Values made inside a device construct's arm are readable only inside it; a name rebound there
// to a new array is merged in place into the array it held before.
#include "eagle/core/error.hpp"
#include "graph/state.hpp"

namespace eagle {

// A buffer made inside an arm is readable only while that arm is open.
void Recording::State::check_readable(int buffer, const std::string& what) const {
  const auto where = scope[static_cast<std::size_t>(buffer)];
  if (where.first < 0) return;
  for (const auto& o : open)
    if (o == where) return;
  const NodeInfo& c = nodes[static_cast<std::size_t>(where.first)];
  throw RecordError(what + " reads array '" + buffers[static_cast<std::size_t>(buffer)].label +
                    "', made inside arm " + std::to_string(where.second) + " of " + node_name(c) +
                    ", after that arm: when the arm does not run it holds nothing. Make the "
                    "array before the construct and write it in place inside (buffer=)");
}

namespace {

// Every writer of buffer `from` must be per-sample and reduce nothing: then it may write the old
// array in place. Throws RecordError naming the first that is not.
void check_in_place_writers(const Recording::State& s, int from, const std::string& what) {
  for (int id : s.nodes_of_buffer[static_cast<std::size_t>(from)]) {
    const NodeInfo& n = s.nodes[static_cast<std::size_t>(id)];
    for (const NodeArgInfo& a : n.arrays) {
      if (a.buffer != from || !writes(a.access)) continue;
      const Kernel* k = s.kernels[static_cast<std::size_t>(id)].get();
      if (!k || !k->def().per_sample || k->def().reduces)
        throw RecordError(what + ": " + node_name(n) + " (kernel " + n.kernel + ") " +
                          (k && k->def().reduces ? "reduces across samples" : "is not per-sample") +
                          ", so writing the old array in place would race. Keep the result in "
                          "an array made before the construct with buffer= (e.g. ping-pong "
                          "two arrays)");
    }
  }
}

}  // namespace

// `y = new` inside a device construct, where y held a value from outside it and `new` was made
// in the open arm: the new value's buffer is merged into the old view, in place, so the name
// keeps one array across the construct (and across a loop's turns). Every change to what was
// recorded before is journaled, so a refusal here (or later in the same call) undoes it.
void Recording::State::merge_rebound(int old_value, int new_value) {
  const auto arm = innermost_condition();
  if (arm.first < 0) return;
  const ValueData old_v = values[static_cast<std::size_t>(old_value)];
  const ValueData new_v = values[static_cast<std::size_t>(new_value)];
  if (old_v.buffer == new_v.buffer || scope[static_cast<std::size_t>(new_v.buffer)] != arm ||
      scope[static_cast<std::size_t>(old_v.buffer)] == arm)
    return;  // not a rebinding across the construct's boundary
  const BufferInfo& nb = buffers[static_cast<std::size_t>(new_v.buffer)];
  const std::string what = "rebinding a name held by array '" +
                           buffers[static_cast<std::size_t>(old_v.buffer)].label + "' to '" +
                           nb.label + "' inside arm " + std::to_string(arm.second) + " of " +
                           node_name(nodes[static_cast<std::size_t>(arm.first)]);
  if (nb.kind != BufferKind::internal || new_v.byte_offset != 0 || !new_v.strides.empty() ||
      !old_v.strides.empty() ||
      view_span_bytes(new_v.shape, {}, new_v.dtype) != static_cast<int64_t>(nb.bytes) ||
      new_v.shape != old_v.shape || new_v.dtype != old_v.dtype)
    throw RecordError(what +
                      ": the new value must be a whole new array of the old one's shape "
                      "and dtype (and both contiguous) to be merged in place; write the old "
                      "array with buffer=");
  const int from = new_v.buffer, to = old_v.buffer;
  check_in_place_writers(*this, from, what);
  using Undo = Recording::State::Undo;
  auto& to_nodes = nodes_of_buffer[static_cast<std::size_t>(to)];
  auto& to_values = values_of_buffer[static_cast<std::size_t>(to)];
  journal.push_back({Undo::Kind::nodes_of_size, to, 0, 0, 0, to_nodes.size()});
  journal.push_back({Undo::Kind::values_of_size, to, 0, 0, 0, to_values.size()});
  for (int id : nodes_of_buffer[static_cast<std::size_t>(from)]) {
    NodeInfo& n = nodes[static_cast<std::size_t>(id)];
    bool touched = false;
    for (std::size_t k = 0; k < n.arrays.size(); ++k) {
      NodeArgInfo& a = n.arrays[k];
      if (a.buffer != from) continue;
      journal.push_back(
          {Undo::Kind::node_arg, id, static_cast<int>(k), a.buffer, a.byte_offset, 0});
      a.buffer = to;
      a.byte_offset += old_v.byte_offset;
      touched = true;
    }
    if (touched) {
      to_nodes.push_back(id);
      if (n.kind == NodeKind::kernel)
        check_races(n, kernels[static_cast<std::size_t>(id)]->def().per_sample);
    }
  }
  for (int id : values_of_buffer[static_cast<std::size_t>(from)]) {
    ValueData& v = values[static_cast<std::size_t>(id)];
    if (v.buffer != from) continue;
    journal.push_back({Undo::Kind::value_at, id, 0, v.buffer, v.byte_offset, 0});
    v.buffer = to;
    v.byte_offset += old_v.byte_offset;
    to_values.push_back(id);
  }
  journal.push_back({Undo::Kind::merged_into, from, 0,
                     buffers[static_cast<std::size_t>(from)].merged_into, 0, 0});
  buffers[static_cast<std::size_t>(from)].merged_into = to;
  // The writers now overwrite the old array in place: save what earlier derivatives read of it.
  std::vector<std::pair<int, NodeArgInfo>> writers;
  for (int id : nodes_of_buffer[static_cast<std::size_t>(from)])
    for (const NodeArgInfo& a : nodes[static_cast<std::size_t>(id)].arrays)
      if (a.buffer == to && writes(a.access)) writers.emplace_back(id, a);
  for (const auto& [id, a] : writers) save_before_existing(id, a);
}

void Recorder::assign(Value& dst, const Value& src) {
  Recording::State& s = *rec_->s_;
  if (dst.raw_ == rec_ && src.raw_ == rec_ && !s.finished && dst.id_ >= 0 && src.id_ >= 0 &&
      dst.id_ != src.id_) {
    s.value(dst, "Recorder::assign: dst");
    s.value(src, "Recorder::assign: src");
    s.flush_deferred();  // a merge moves values; a deferred call's arguments must not move
    Transaction t(s);
    s.merge_rebound(dst.id_, src.id_);
    t.commit();
  }
  dst.rec_ = src.rec_;
  dst.raw_ = src.raw_;
  dst.id_ = src.id_;
}

}  // namespace eagle
