// Recording: kernel calls become nodes; edges come from what each node reads and writes.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "eagle/core/array.hpp"
#include "eagle/kernel/kernel.hpp"

namespace eagle {

class Recording;
class Recorder;

// An array inside a recording: a view (byte offset, shape, strides, dtype) of one of the graph's
// buffers. It has no memory until the graph is built. A Value refers to its recording without
// owning it: using one after its recording (its Graph) is gone, or a default-constructed one,
// throws InvalidArgument.
class Value {
 public:
  Value() = default;
  Value(const Value&) = default;
  // Rebinding a name inside a device construct (`y = r.call(k, {y})` in a while_ or if_ arm) to
  // a value made there merges the new value in place into the array the name held before, so a
  // loop carries it from turn to turn and it is readable after the construct. This is sugar for
  // Recorder::assign(*this, other); see there.
  Value& operator=(const Value& other);
  const Shape& shape() const;
  Shape strides() const;  // in elements
  DType dtype() const;
  int64_t numel() const;
  bool is_contiguous() const;
  // Rows [begin, end) of dimension 0 (a contiguous view of the same buffer).
  Value slice(int64_t begin, int64_t end) const;
  // [begin, end) of dimension `dim`: a strided view unless dim is 0 (only kernels whose parameter
  // declares `strided` take one).
  Value slice(int dim, int64_t begin, int64_t end) const;
  // Dimensions d0 and d1 swapped: a strided view.
  Value transpose(int d0, int d1) const;
  // Same elements, new shape (the value must be contiguous).
  Value reshape(const Shape& shape) const;
  // The value repeated to `shape` by numpy's rules (a missing leading dim or one of size 1
  // repeats with stride 0): a strided view that no kernel may write.
  Value broadcast_to(const Shape& shape) const;
  int id() const { return id_; }
  bool defined() const { return !rec_.expired(); }
  // The recording buffer the value views (Recording::buffers()) and the byte offset of its first
  // element there.
  int buffer() const;
  int64_t byte_offset() const;

 private:
  friend class Recorder;
  friend class Recording;
  Value(const std::shared_ptr<Recording>& rec, int id) : rec_(rec), raw_(rec.get()), id_(id) {}
  std::shared_ptr<Recording> live(const char* what) const;
  std::weak_ptr<Recording> rec_;
  Recording* raw_ = nullptr;  // identity only: which recording the value belongs to
  int id_ = -1;
};

// One argument of a recorded call: an array or a scalar.
class Arg {
 public:
  Arg(Value v) : value_(v) {}            // NOLINT(google-explicit-constructor)
  Arg(Scalar s) : value_(s) {}           // NOLINT(google-explicit-constructor)
  Arg(double v) : value_(Scalar(v)) {}   // NOLINT(google-explicit-constructor)
  Arg(float v) : value_(Scalar(v)) {}    // NOLINT(google-explicit-constructor)
  Arg(int v) : value_(Scalar(v)) {}      // NOLINT(google-explicit-constructor)
  Arg(int64_t v) : value_(Scalar(v)) {}  // NOLINT(google-explicit-constructor)
  const std::variant<Value, Scalar>& get() const { return value_; }

 private:
  std::variant<Value, Scalar> value_;
};

// Where an output goes: a caller's array (written directly), or an existing value of the
// recording (written in place, so the output keeps that value's buffer).
using BufferArg = std::variant<Array, Value>;

struct CallOptions {
  std::vector<BufferArg> buffers;  // per output, in order; outputs past the list are allocated
  std::string label;               // names the node (and its new arrays); default: kernel name
};
inline CallOptions buffer(BufferArg b, std::string label = {}) {
  return CallOptions{{std::move(b)}, std::move(label)};
}

enum class BufferKind : uint8_t {
  internal,  // allocated by the graph at build: an output, a temporary, a shadow of a param
  param,     // a named argument; bind() swaps it
  external,  // a caller's array passed with buffer=; the graph writes it directly
};
std::string_view buffer_kind_name(BufferKind kind);

struct BufferInfo {
  int id;
  std::string label;
  BufferKind kind;
  Shape shape;  // of the array the buffer was created for
  DType dtype;
  std::size_t bytes;
  int shadow_of = -1;     // for a param's private copy: the param buffer it is copied from
  int merged_into = -1;   // a rebound value's buffer merged into another: never allocated
  bool constant = false;  // Recorder::constant's: written by its own fill only
};

struct NodeArgInfo {
  std::string param;  // the kernel's parameter name
  Access access;
  int buffer;
  int64_t byte_offset;  // of the view's first element (its lowest address: strides are >= 0)
  int64_t bytes;        // the span of bytes the view can touch, from byte_offset
  Shape shape;
  DType dtype;
  Shape strides = {};  // in elements; empty for a contiguous view
};

// copy_in: a written param's private copy, filled at the start of each launch. if_, switch_,
// while_: device conditions; arrays[0] is the one-cell u32 condition, `bodies` the arms.
// fork: `bodies` are the branches of Recorder::parallel, run concurrently.
// save: with RecordOptions::record, a copy of what a later node overwrites in place and a
// derivative reads (the reverse pass reads the copy); arrays[0] is the source, arrays[1] the copy.
enum class NodeKind : uint8_t { kernel, copy_in, if_, switch_, while_, fork, save };
std::string_view node_kind_name(NodeKind kind);
// Nodes that copy bytes from arrays[0] to arrays[1] (both contiguous, the same size).
inline bool is_copy(NodeKind k) {
  return k == NodeKind::copy_in || k == NodeKind::save;
}
inline bool is_control(NodeKind k) {
  return k == NodeKind::if_ || k == NodeKind::switch_ || k == NodeKind::while_ ||
         k == NodeKind::fork;
}

struct NodeInfo {
  int id;
  NodeKind kind;
  std::string label;   // the call's label or the kernel's name
  std::string kernel;  // kernel name ("copy_in" for a param's copy)
  std::vector<NodeArgInfo> arrays;
  std::vector<ScalarArg> scalars;
  // Nodes that must finish first (ascending), all in the same body (or all at the top level):
  // a body's nodes are ordered after what their construct depends on.
  std::vector<int> deps;
  std::vector<int> waits;  // fork branches: nodes of earlier branches this one waits for
  std::vector<std::vector<int>> bodies;  // control nodes: node ids of each arm, in order
  int parent = -1;                       // the control node whose body holds this node, or -1
  std::string scope;  // the Recorder::scope names open when it was recorded, joined by '/'
  // while_: the most turns it runs (for_'s n, while_'s max_turns; -1: no cap) and, with
  // RecordOptions::record, the buffer of a one-cell u32 array counting the turns each launch
  // ran (-1: none; what the reverse pass walks back), the index of the per-turn tape.
  int64_t max_turns = -1;
  int turns = -1;
  // A taped while_ inside another taped loop: the buffer of the tape [rows of the enclosing
  // loops] of its turn counts, one per turn of the enclosing loops (-1: none).
  int turns_tape = -1;
};

// Options of a recording.
struct RecordOptions {
  // Keep what a reverse pass (eagle/diff/reverse.hpp) needs: the name map (Recording::names())
  // and, before a node overwrites in place an array that a derivative of an earlier node (or of
  // the node itself) reads, a `save` node copying it (Recording::snapshot, saved_bytes()).
  bool record = false;
};

// What the reverse pass reads for one array argument of a kernel node (RecordOptions::record).
struct Snapshot {
  enum class State : uint8_t {
    intact,  // the argument's own view still holds it
    saved,   // a later node overwrote it; `saved` is the copy made before
    lost,    // overwritten and not saved (see lost_to)
    taped,   // inside a capped loop: `saved` is the whole tape [rows, ...], row t what the
             // argument held in turn t (NodeInfo::turns of the loop counts the turns); inside
             // nested loops the row runs over the turns of all of them (outer row * cap + turn)
  };
  State state = State::intact;
  NodeArgInfo saved;    // for State::saved: a view of the copy; State::taped: the tape
  std::string lost_to;  // for State::lost: the node that overwrote it, and why it was not saved
};

// One branch of Recorder::parallel. Record into it with the recorder as usual.
class Branch {
 public:
  // Orders this branch after the node that last wrote `v` (in an earlier branch of this fork,
  // or anywhere before it): one ordering edge. Without it, branches that touch the same memory
  // are refused as a race.
  void wait(const Value& v);
  int index() const { return index_; }

 private:
  friend class Recorder;
  Branch(Recording* rec, int index) : rec_(rec), index_(index) {}
  Recording* rec_;
  int index_;
};

// Records calls into a recording. Every method is transactional: when it throws (a refusal, or
// an exception from the caller's own arm or body), the recording is left exactly as it was
// before the call, inside arms and bodies too; values the refused call made are dead (using one
// throws).
class Recorder {
 public:
  // A named argument, bound to `initial` until bind() swaps it. The graph never writes it:
  // if any node writes it, the graph writes a private copy filled at the start of each launch.
  Value param(const std::string& name, const Array& initial);
  // A caller's array that the graph reads and writes directly, every launch (state that
  // persists across launches: an accumulator, a cache). The caller keeps it alive.
  Value external(const Array& array, const std::string& label);
  // A new graph-owned array with unspecified contents (use it as a buffer= for fill).
  Value empty(const Shape& shape, DType dtype, const std::string& label = "");
  // A one-element array ([] shape) holding `value`, filled at each launch by one node per
  // device construct and arm: a second call with the same value and dtype in the same arm (or
  // fork branch, or loop body) returns the same array, so that the constants of many derivative
  // calls cost one fill each. Read it only: a node writing it is refused.
  Value constant(double value, DType dtype);
  // Appends a node calling `kernel` on the read and read-write arrays and the scalars, in the
  // kernel's parameter order; returns its outputs (one per write-only parameter), allocated
  // unless `options.buffers` supplies them. For a read-write parameter the value passed is
  // updated in place and returned too, after the write-only outputs.
  std::vector<Value> call_all(const Kernel& kernel, const std::vector<Arg>& args,
                              const CallOptions& options = {});
  // call_all for a kernel with exactly one output (write-only or read-write).
  Value call(const Kernel& kernel, const std::vector<Arg>& args, const CallOptions& options = {});
  // Rebinds `dst` to `src`. Outside device constructs it is a plain handle copy. Inside one,
  // when `dst` held a value made outside it and `src` is a whole new array made in the open arm,
  // the new array is merged in place into the one `dst` held, so the name keeps one array
  // across the construct (and across a loop's turns). That needs every kernel writing the new
  // array to be per-sample and to reduce nothing; otherwise a RecordError says why and how to fix
  // it (keep the result in an array made before the construct, buffer=, e.g. ping-pong).
  void assign(Value& dst, const Value& src);
  // Device conditions: `cell` is a one-cell u32 array computed by the graph. Every arm is
  // recorded; which one runs is decided on the device at every launch. if_: then_arm runs when
  // the cell is non-zero, else_arm (if given) when it is zero. switch_: arm k runs when the cell
  // holds k; none when it is >= the number of arms. while_: the body runs while the cell is
  // non-zero (the body must update the cell). A value carried from one turn to the next must
  // be written in place (buffer=) so every turn reads what the last one wrote. `max_turns`
  // (>= 1; -1: none) caps the loop: after that many turns it stops, its cell set to 0; reverse
  // mode needs the cap (it sizes the per-turn tape) and refuses an uncapped while_.
  void if_(const Value& cell, const std::function<void()>& then_arm,
           const std::function<void()>& else_arm = nullptr);
  void switch_(const Value& cell, const std::vector<std::function<void()>>& arms);
  void while_(const Value& cell, const std::function<void()>& body, int64_t max_turns = -1);
  // A capped loop: body runs at most n times; inside it, break_if(cell) ends the loop and
  // continue_if(cell) ends this turn when the cell is non-zero. Either guards the rest of the
  // body (what is recorded after it runs only if no break or continue fired). Both must be
  // called directly in the for_ body, not inside a nested construct.
  void for_(int64_t n, const std::function<void()>& body);
  void break_if(const Value& cell);
  void continue_if(const Value& cell);
  // if / elif / else: the conditions (1 to kernels::kMaxFirstTrue one-cell u32 arrays, all
  // computed before the chain) are decided once at the head into one cell, then a switch runs the
  // first arm whose condition is non-zero, or else_arm (if given) when none is.
  void if_chain(const std::vector<std::pair<Value, std::function<void()>>>& arms,
                const std::function<void()>& else_arm = nullptr);
  // A fork: each branch is recorded in order but runs concurrently with the others (no edges
  // between branches except Branch::wait); leaving parallel() joins them, so what follows is
  // ordered after every branch that it touches.
  void parallel(const std::vector<std::function<void(Branch&)>>& branches);
  // What the graph returns from g().
  void result(const std::vector<Value>& values);
  void result(const Value& value) { result(std::vector<Value>{value}); }
  // A device check: a graph cannot throw from the device, so a kernel writes what it found wrong
  // into `flags` and, after each g() (which waits anyway), the graph hands `raise` the array
  // `flags` holds (on the graph's device); `raise` throws to report it. `flags` must be written
  // by a call of this recording (not a param or external array) and contiguous; call check at
  // the top level (not inside a device construct or fork branch). Checks run in the order they
  // were recorded.
  void check(const Value& flags, std::function<void(const Array&)> raise);

  // ---- for passes that record over what was recorded (the reverse pass)
  // The recording being recorded into (nodes, buffers and snapshots so far).
  const Recording& recording() const;
  // A value viewing `buffer` of this recording at `byte_offset` with `shape`, `dtype` (the
  // buffer's) and element `strides` (empty: contiguous): e.g. what a recorded node argument
  // views. The view must lie within the buffer. The buffer is readable anywhere from then on,
  // even one made inside an arm (the pass reads it only where it holds something).
  Value view(int buffer, int64_t byte_offset, const Shape& shape, DType dtype,
             const Shape& strides = {});
  // Whether calls go to the top level now (no device construct or fork branch is open).
  bool at_top_level() const;
  // Runs `body` as one transaction: when it throws, the recording is as it was before.
  void atomically(const std::function<void()>& body);
  // The reverse of everything recorded so far has been recorded: later in-place writes no longer
  // save what those nodes' derivatives read (a later reverse pass reading such a value is
  // refused).
  void release_saves();
  // Runs `body` as one transaction that saves and tapes nothing (RecordOptions::record aside):
  // what a reverse pass records is never differentiated itself.
  void without_saves(const std::function<void()>& body);

  // ---- deferred calls: a derivative's last product handed to the next derivative to fuse
  // What a deferred call carries for whoever may take it over (read back with dynamic_cast).
  class DeferredTag {
   public:
    virtual ~DeferredTag() = default;
  };
  // call_all recorded later: right before the first later call that reads or writes what it
  // writes or writes what it reads, before a device construct, fork or without_saves body opens
  // or closes, at the end of the recording; or never, when take_deferred takes it over first.
  // Its outputs are made now (their contents are unspecified until it is recorded). Its argument
  // counts, dtypes and shapes are checked now; the checks of the node itself (races, readable
  // arrays) when it is recorded.
  std::vector<Value> call_deferred(const Kernel& kernel, const std::vector<Arg>& args,
                                   std::shared_ptr<const DeferredTag> tag);
  // The tag of the deferred call whose only output is `v`'s whole array, while that call is not
  // recorded yet; nullptr otherwise.
  const DeferredTag* deferred_tag(const Value& v) const;
  // Takes over that call (deferred_tag(v) must be non-null): it is never recorded and `v`'s array
  // is never written. Returns its arguments; the caller records what computes the same values
  // into its own arrays (a fused kernel reading the call's arguments instead of `v`).
  std::vector<Arg> take_deferred(const Value& v);

  // Names what is recorded while the returned guard lives: each node's scope is the open scope
  // names joined by '/' ("block0/attention"), kept in to_json and in traces. Scopes nest; the
  // guard must die in the reverse order of creation (as C++ scopes do).
  class Scope {
   public:
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    friend class Recorder;
    explicit Scope(Recording* rec) : rec_(rec) {}
    Recording* rec_;
  };
  [[nodiscard]] Scope scope(const std::string& name);

 private:
  static void close_scope(Recording* rec);
  friend class Recording;
  friend class RecordingBuilder;
  friend class Value;
  explicit Recorder(Recording* rec) : rec_(rec) {}
  Recording* rec_;
};

// What a recording produced: nodes, buffers, params and results. Immutable once recorded.
class Recording : public std::enable_shared_from_this<Recording> {
 public:
  // Runs `body` once with a recorder and returns what it recorded.
  static std::shared_ptr<const Recording> record(const std::function<void(Recorder&)>& body,
                                                 const RecordOptions& options = {});
  Recording(const Recording&) = delete;
  Recording& operator=(const Recording&) = delete;
  ~Recording();

  const std::vector<NodeInfo>& nodes() const;
  // Ids of the top-level nodes in program order (bodies hang off control nodes).
  const std::vector<int>& top() const;
  bool has_control_flow() const;
  const std::vector<BufferInfo>& buffers() const;
  std::vector<std::pair<int, int>> edges() const;  // (from, to)
  const std::vector<std::string>& param_names() const;
  int param_buffer(const std::string& name) const;  // -1 when there is no such param
  const Array& param_initial(int buffer) const;
  const Array& external_array(int buffer) const;
  // The caller's array of a param or external buffer (InvalidArgument for an internal one).
  const Array& caller_array(int buffer) const;
  // Results as (buffer, byte offset, shape, dtype).
  const std::vector<NodeArgInfo>& results() const;
  // Device checks (Recorder::check): the array each reads and what raises its finding.
  struct DeviceCheck {
    NodeArgInfo flags;
    std::function<void(const Array&)> raise;
  };
  const std::vector<DeviceCheck>& checks() const;
  // The kernel and implementation of a kernel node.
  const Kernel& kernel_of(int node) const;
  const KernelImpl& impl_of(int node) const;
  bool finished() const;

  // ---- what reverse mode reads (RecordOptions::record)
  const RecordOptions& options() const;
  // The name map, once finished with RecordOptions::record (empty otherwise): each param by its
  // name (the array bound to it), each external and each labeled Recorder::empty array by its
  // label, and the results as "result.0", "result.1", ... ("result" too when there is one). A
  // name given to several arrays maps to buffer -1 (ambiguous). The entry's `param` is the name.
  const std::map<std::string, NodeArgInfo>& names() const;
  // What the reverse pass reads for array argument `slot` of kernel node `node` (intact when
  // nothing overwrote it later, or when the recording does not record).
  const Snapshot& snapshot(int node, int slot) const;
  // Bytes of the copies `save` nodes make.
  std::size_t saved_bytes() const;

  std::string to_json() const;
  std::string to_dot() const;

  struct State;  // internal: what the recording holds, split by responsibility in src/graph

 private:
  friend class Recorder;
  friend class Value;
  friend class Branch;
  friend class RecordingBuilder;
  Recording();
  std::unique_ptr<State> s_;
};

// An open recording: record into it with recorder(), then finish() it. Graph::record is this
// with one body; later passes (a reverse pass, bindings) record with it too.
class RecordingBuilder {
 public:
  explicit RecordingBuilder(const RecordOptions& options = {});
  Recorder& recorder() { return recorder_; }
  // Checks and seals the recording (shadows written params, numbers nodes in program order,
  // infers edges) and returns it. The builder is spent afterwards.
  std::shared_ptr<const Recording> finish();

 private:
  std::shared_ptr<Recording> rec_;
  Recorder recorder_;
};

}  // namespace eagle
