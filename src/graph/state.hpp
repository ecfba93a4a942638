// Internal: what a recording holds while it is recorded and after, and the operations on it,
// split by responsibility across src/graph:
//   values.cpp      Value handles: lookup, liveness, views (slice, transpose, reshape)
//   storage.cpp     buffers: params, externals, graph-owned arrays, caller memory kept distinct
//   calls.cpp       a kernel call becoming a node
//   hazards.cpp     races within a node and between fork branches; edges from accesses
//   control.cpp     device constructs (if/switch/while/for, guards, elif chains) and forks
//   rebinding.cpp   readability of values made in arms; merging a rebound name in place
//   finish.cpp      the passes that seal a recording: param shadows, numbering, edges
//   transaction.cpp checkpoints and rollback: a refused call leaves the recording as it was
//   saving.cpp      RecordOptions::record: saves before in-place overwrites, per-turn tapes
//                   in capped loops, the name map
//   deferred.cpp    calls recorded when something first depends on them, or taken over
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "eagle/graph/recording.hpp"

namespace eagle {

// A call recorded later, or never (Recorder::call_deferred).
struct DeferredCall {
  Kernel kernel;
  std::vector<Arg> args;
  CallOptions options;              // buffers: its outputs (Values), made when it was deferred
  std::vector<std::string> scopes;  // Recorder::scope names open when it was deferred
  std::shared_ptr<const Recorder::DeferredTag> tag;
};

struct Recording::State {
  struct ValueData {
    int buffer;
    int64_t byte_offset;
    Shape shape;
    Shape strides;  // in elements; empty for a contiguous view
    DType dtype;
    bool dead = false;  // made by a call that was refused and rolled back
  };
  struct LoopFrame {
    Value stop, skip;
    std::size_t depth;  // open.size() at the for_ body's top level
    int guards = 0;     // if_ arms opened by break_if / continue_if, closed when the body ends
  };
  // A loop whose turns are taped (RecordOptions::record, a cap, not inside another loop).
  struct TapeFrame {
    int loop;      // the while_ node
    int64_t cap;   // its turn cap
    Value turn;    // its turn number
    Value index;   // the tape row of this turn: turn, or (the enclosing loop's row) * cap + turn
    int64_t rows;  // rows of its tapes: the product of the caps of it and its enclosing loops
  };
  // One caller array (param or external) by its bytes, to keep caller memory distinct.
  struct CallerSpan {
    uintptr_t hi;
    int buffer;
  };
  // An undo record of an in-place change (merging a rebound value rewrites earlier state).
  struct Undo {
    enum class Kind : uint8_t {
      node_arg,
      value_at,
      merged_into,
      nodes_of_size,
      values_of_size,
      snapshot,  // snapshots[id][slot] was snapshot_undo[size]
      scope      // scope[id] was (buffer, slot)
    };
    Kind kind;
    int id;    // node, value or buffer
    int slot;  // the node's argument index
    int buffer;
    int64_t byte_offset;
    std::size_t size;
  };
  struct Checkpoint {
    std::size_t values, buffers, nodes, params, results, checks, journal;
    std::vector<std::pair<int, int>> open;
    std::vector<LoopFrame> loops;
    std::vector<TapeFrame> tapes;
    std::vector<int> pending_waits;
    bool results_set;
    int save_horizon;
    std::vector<DeferredCall> deferred;
  };

  Recording* self = nullptr;

  // ---- values (values.cpp)
  std::vector<ValueData> values;
  const ValueData& value(const Value& v, const std::string& what) const;
  int new_value(int buffer, int64_t byte_offset, const Shape& shape, DType dtype,
                const Shape& strides = {});
  Value handle(int value) const;  // a Value of this recording

  // ---- buffers (storage.cpp)
  std::vector<BufferInfo> buffers;
  std::vector<Array> arrays;  // per buffer: a param's initial array or an external array
  std::vector<std::vector<int>> nodes_of_buffer;   // per buffer: nodes whose arguments view it
  std::vector<std::vector<int>> values_of_buffer;  // per buffer: values viewing it
  // Per buffer: the innermost device construct (node, arm) it was made in, or (-1, -1). A value
  // made in an arm may hold nothing when the arm does not run: it is not readable after it.
  std::vector<std::pair<int, int>> scope;
  std::map<std::pair<int, uintptr_t>, CallerSpan> caller_memory;  // (device code, lo) -> span
  std::unordered_map<const void*, std::vector<int>> externals_by_data;
  std::unordered_map<std::string, int> param_by_name;
  std::vector<std::string> param_names;
  int new_buffer(BufferKind kind, const Shape& shape, DType dtype, std::string label);
  void check_distinct_memory(const Array& a, const std::string& what) const;
  void remember_caller_memory(const Array& a, int buffer);
  int external_buffer_for(const Array& a) const;  // an existing external of the same view, or -1

  // ---- nodes (calls.cpp, control.cpp)
  std::vector<NodeInfo> nodes;
  std::vector<std::unique_ptr<Kernel>> kernels;  // per node (null for copies and constructs)
  std::vector<KernelImpl> impls;
  std::vector<int> top;
  // Recorder::constant's arrays: (value bits, dtype, construct node, arm) -> value id.
  std::map<std::tuple<uint64_t, int, int, int>, int> constants;
  int add_node(NodeInfo node, const Kernel* kernel, KernelImpl impl);
  std::vector<int>& current_list();
  NodeArgInfo arg_info(const std::string& param, Access access, int value) const;
  ArrayMeta supplied_meta(const BufferArg& b, const ArrayMeta& want, const std::string& what) const;
  int output_value(const BufferArg* supplied, const ArrayMeta& meta, const std::string& label,
                   const std::string& what, const std::string& who);
  void check_node_args(const NodeInfo& node, const KernelDef& def) const;

  // ---- device constructs and forks (control.cpp)
  std::vector<int> pending_waits;  // waits of the open branch, for its next item
  std::vector<LoopFrame> loops;
  std::vector<std::pair<int, int>> open;  // (control node, arm) being recorded, innermost last
  std::vector<std::string> scopes;        // Recorder::scope names open now, outermost first
  int record_control(NodeKind kind, const Value& cell,
                     const std::vector<std::function<void()>>& arms);
  // A while_ (max_turns -1: uncapped) or, with for_loop, the while_ of a for_ (which caps it).
  int record_loop(const Value& cell, const std::function<void()>& body, int64_t max_turns,
                  bool for_loop);
  std::pair<int, int> innermost_condition() const;
  void guard_rest_of_loop_body(const Value& flag, const Value& cell, const char* who);
  int item_holding(const std::vector<int>& list, int id) const;

  // ---- hazards (hazards.cpp)
  void subtree_accesses(int node, std::vector<NodeArgInfo>& out) const;
  void check_races(const NodeInfo& node, bool per_sample) const;
  void check_fork_races(int fork) const;
  void infer_edges(std::vector<int>& list);
  // The order keys (KernelDef::order_key) of the kernels in a node's subtree, once each.
  void subtree_order_keys(int id, std::vector<const void*>& out) const;

  // ---- rebinding (rebinding.cpp)
  void check_readable(int buffer, const std::string& what) const;
  void merge_rebound(int old_value, int new_value);

  // ---- finishing (finish.cpp)
  std::vector<NodeArgInfo> results;
  std::vector<int> result_values;
  bool results_set = false;
  std::vector<DeviceCheck> checks;  // resolved at finish, from check_values
  std::vector<std::pair<int, std::function<void(const Array&)>>> check_values;
  bool finished = false;
  void shadow_written_params();
  int shadow_param(int param, int first, const std::vector<int>& item_of);
  void renumber();
  void finish();

  // ---- what the reverse pass needs (saving.cpp)
  RecordOptions options;
  std::vector<TapeFrame> tapes;  // the open taped loops, outermost first
  int no_saving = 0;             // inside Recorder::without_saves
  bool saving() const { return options.record && no_saving == 0; }
  int open_loops_here() const;  // while_ nodes open now
  // Whether the open loops are all taped (and there is one): what they read is taped.
  bool all_loops_taped() const {
    return !tapes.empty() && static_cast<int>(tapes.size()) == open_loops_here();
  }
  std::vector<std::vector<Snapshot>> snapshots;  // per node, per array argument
  std::vector<Snapshot> snapshot_undo;           // old snapshots, by Undo::size
  std::vector<bool> labeled;                     // per buffer: Recorder::empty with a label
  int save_horizon = 0;  // nodes before it were released (Recorder::release_saves)
  std::map<std::string, NodeArgInfo> names;
  // Before `node` (not yet added) is added: saves what it overwrites that a derivative reads.
  // Returns, per argument of `node`, the saved view of its own input it overwrites (or none).
  std::vector<Snapshot> save_overwritten(const NodeInfo& node, const Kernel& kernel);
  void set_snapshot(int node, int slot, Snapshot snap);
  void make_names();
  // Whether the reverse pass reads argument `slot` of node `id` (a derivative's read, or the
  // condition of an if_ / switch_).
  bool derivative_reads(int id, int slot) const;
  // The constructs (node, arm) holding node `id`, outermost first.
  std::vector<std::pair<int, int>> chain_of(int id) const;
  // The snapshot of a condition cell (an if_ or switch_ about to be added here).
  Snapshot note_condition(const NodeArgInfo& cond);
  // After kernel node `id` was added: its write-only arguments a derivative reads, inside a
  // loop, are to be taped (or lost).
  void tape_outputs(int id);
  // At the end of taped loop `loop`'s body: each argument to be taped that the loop writes gets
  // a tape [cap, ...] and a tape_write at the turn's row before its node (after it, for a written
  // one); the others hold the same in every turn and are read in place.
  void resolve_tapes(int loop);
  // Saves, before writer node `writer` (already added, rewritten by a merge), what earlier
  // nodes' derivatives read of `w`.
  void save_before_existing(int writer, const NodeArgInfo& w);
  // Adds `node` right before node `before` (after it, with `after`), in the same list.
  int insert_before(NodeInfo node, int before, bool after = false);

  // ---- deferred calls (deferred.cpp)
  std::vector<DeferredCall> deferred;  // in the order they were deferred
  // Records, in order, the deferred calls a call reading `reads` and writing `writes` (value
  // ids) must follow: those writing what it touches, or reading what it writes.
  void flush_deferred_before(const std::vector<int>& reads, const std::vector<int>& writes);
  // Records every deferred call (before a construct, fork or saving region opens or closes, and
  // at finish: a deferred call is recorded where it was deferred).
  void flush_deferred();
  void flush_deferred_at(std::size_t index);

  // ---- transactions (transaction.cpp)
  std::vector<Undo> journal;
  int transaction_depth = 0;
  Checkpoint checkpoint() const;
  void rollback(const Checkpoint& c);
  void check_open(const char* who) const;
};

// Every Recorder method runs inside one: rolled back unless commit() is reached.
class Transaction {
 public:
  explicit Transaction(Recording::State& s);
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void commit();

 private:
  Recording::State& s_;
  Recording::State::Checkpoint checkpoint_;
  bool committed_ = false;
};

// Shared helpers.
inline bool overlaps(int64_t a0, int64_t a1, int64_t b0, int64_t b1) {
  return a0 < b1 && b0 < a1;
}
std::string node_name(const NodeInfo& n);
// Bytes from a view's first element to one past its last (strides >= 0; empty: contiguous).
int64_t view_span_bytes(const Shape& shape, const Shape& strides, DType dtype);
// What a node's argument `param` records of a view of buffer `buffer` (its span from its layout).
NodeArgInfo view_arg_info(const std::string& param, Access access, int buffer, int64_t byte_offset,
                          const Shape& shape, DType dtype, const Shape& strides);

}  // namespace eagle
