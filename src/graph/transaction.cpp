// Checkpoints and rollback: a refused call (or an exception from the caller's own arm or body)
// leaves the recording exactly as it was before the call. Appended state is truncated; the few
// in-place changes (merging a rebound value) are undone from the journal; values the refused call
// made are marked dead, so a handle the caller kept cannot silently alias a later value.
#include <algorithm>

#include "eagle/core/error.hpp"
#include "graph/state.hpp"

namespace eagle {

void Recording::State::check_open(const char* who) const {
  if (finished)
    throw InvalidArgument(std::string(who) +
                          ": the recording has finished; record calls only inside the function "
                          "passed to Graph::record (or before RecordingBuilder::finish)");
}

Recording::State::Checkpoint Recording::State::checkpoint() const {
  return Checkpoint{values.size(),
                    buffers.size(),
                    nodes.size(),
                    param_names.size(),
                    result_values.size(),
                    check_values.size(),
                    journal.size(),
                    open,
                    loops,
                    tapes,
                    pending_waits,
                    results_set,
                    save_horizon,
                    deferred};
}

namespace {

template <class T>
void pop_trailing_from(std::vector<int>& list, T limit) {
  while (!list.empty() && static_cast<T>(list.back()) >= limit) list.pop_back();
}

// A list of nodes may hold a newer node before older ones (a save placed before a construct
// that was open when it was added): every node past the checkpoint goes.
void drop_newer(std::vector<int>& list, std::size_t limit) {
  list.erase(std::remove_if(list.begin(), list.end(),
                            [&](int id) { return static_cast<std::size_t>(id) >= limit; }),
             list.end());
}

}  // namespace

void Recording::State::rollback(const Checkpoint& c) {
  // In-place changes, newest first.
  for (std::size_t k = journal.size(); k-- > c.journal;) {
    const Undo& u = journal[k];
    switch (u.kind) {
      case Undo::Kind::node_arg:
        if (static_cast<std::size_t>(u.id) < c.nodes) {
          NodeArgInfo& a =
              nodes[static_cast<std::size_t>(u.id)].arrays[static_cast<std::size_t>(u.slot)];
          a.buffer = u.buffer;
          a.byte_offset = u.byte_offset;
        }
        break;
      case Undo::Kind::value_at:
        values[static_cast<std::size_t>(u.id)].buffer = u.buffer;
        values[static_cast<std::size_t>(u.id)].byte_offset = u.byte_offset;
        break;
      case Undo::Kind::merged_into:
        if (static_cast<std::size_t>(u.id) < c.buffers)
          buffers[static_cast<std::size_t>(u.id)].merged_into = u.buffer;
        break;
      case Undo::Kind::nodes_of_size:
        if (static_cast<std::size_t>(u.id) < c.buffers)
          nodes_of_buffer[static_cast<std::size_t>(u.id)].resize(u.size);
        break;
      case Undo::Kind::values_of_size:
        if (static_cast<std::size_t>(u.id) < c.buffers)
          values_of_buffer[static_cast<std::size_t>(u.id)].resize(u.size);
        break;
      case Undo::Kind::scope:
        if (static_cast<std::size_t>(u.id) < c.buffers)
          scope[static_cast<std::size_t>(u.id)] = {u.buffer, u.slot};
        break;
      case Undo::Kind::snapshot:
        if (static_cast<std::size_t>(u.id) < c.nodes)
          snapshots[static_cast<std::size_t>(u.id)][static_cast<std::size_t>(u.slot)] =
              snapshot_undo[u.size];
        break;
    }
  }
  journal.resize(c.journal);
  // Appended state.
  std::erase_if(constants,
                [&](const auto& e) { return static_cast<std::size_t>(e.second) >= c.values; });
  nodes.resize(c.nodes);
  snapshots.resize(c.nodes);
  kernels.resize(c.nodes);
  impls.resize(c.nodes);
  buffers.resize(c.buffers);
  arrays.resize(c.buffers);
  labeled.resize(c.buffers);
  scope.resize(c.buffers);
  nodes_of_buffer.resize(c.buffers);
  values_of_buffer.resize(c.buffers);
  for (auto& list : nodes_of_buffer) pop_trailing_from(list, c.nodes);
  for (auto& list : values_of_buffer) pop_trailing_from(list, c.values);
  for (std::size_t v = c.values; v < values.size(); ++v) values[v].dead = true;
  drop_newer(top, c.nodes);
  for (const auto& [node, arm] : c.open)
    drop_newer(nodes[static_cast<std::size_t>(node)].bodies[static_cast<std::size_t>(arm)],
               c.nodes);
  while (param_names.size() > c.params) {
    param_by_name.erase(param_names.back());
    param_names.pop_back();
  }
  for (auto it = caller_memory.begin(); it != caller_memory.end();)
    it = static_cast<std::size_t>(it->second.buffer) >= c.buffers ? caller_memory.erase(it)
                                                                  : std::next(it);
  for (auto it = externals_by_data.begin(); it != externals_by_data.end();) {
    auto& ids = it->second;
    ids.erase(std::remove_if(ids.begin(), ids.end(),
                             [&](int b) { return static_cast<std::size_t>(b) >= c.buffers; }),
              ids.end());
    it = ids.empty() ? externals_by_data.erase(it) : std::next(it);
  }
  result_values.resize(c.results);
  check_values.resize(c.checks);
  results_set = c.results_set;
  open = c.open;
  loops = c.loops;
  tapes = c.tapes;
  pending_waits = c.pending_waits;
  save_horizon = c.save_horizon;
  deferred = c.deferred;
}

Transaction::Transaction(Recording::State& s) : s_(s), checkpoint_(s.checkpoint()) {
  ++s_.transaction_depth;
}

Transaction::~Transaction() {
  --s_.transaction_depth;
  if (!committed_) s_.rollback(checkpoint_);
}

void Transaction::commit() {
  committed_ = true;
  // Nothing can roll back past the outermost call: its journal is done with.
  if (s_.transaction_depth == 1) {
    s_.journal.clear();
    s_.snapshot_undo.clear();
  }
}

void Recorder::atomically(const std::function<void()>& body) {
  Recording::State& s = *rec_->s_;
  s.check_open("Recorder::atomically");
  Transaction t(s);
  body();
  t.commit();
}

}  // namespace eagle
