#include "eagle/exec/graph.hpp"

#include <algorithm>
#include <iostream>
#include <mutex>
#include <optional>

#include "eagle/core/error.hpp"
#include "exec/executor.hpp"
#include "exec/node_calls.hpp"

namespace eagle {

struct Graph::State {
  Device device = Device::cpu();
  BuildOptions options;
  std::shared_ptr<Stream> stream;  // the graph's own, or one it shares (BuildOptions::stream)
  std::vector<Array> buffers;      // per recording buffer: its memory on the built device
  detail::Plan plan;
  std::vector<std::vector<int>> nodes_of_buffer;  // which planned nodes touch each buffer
  std::vector<Array> results;
  std::vector<Array> checks;  // per device check of the recording: the flags array
  std::unique_ptr<detail::Executor> executor;
  std::size_t allocated = 0;
  std::size_t workspaces = 0;  // the calls' workspaces (in the arena, or the executor's own)
  std::shared_ptr<detail::TraceSink> trace;  // while tracing: what the executor writes
  int rebuilds = 0;
  bool warned_rebuild = false;
  std::function<void(const std::string&)> warn = [](const std::string& m) {
    std::cerr << "eagle: warning: " << m << "\n";
  };
};

Graph::Graph(std::shared_ptr<const Recording> rec)
    : rec_(std::move(rec)),
      state_(std::make_unique<State>()),
      mutex_(std::make_unique<std::mutex>()) {}
Graph::Graph(Graph&&) noexcept = default;
Graph& Graph::operator=(Graph&& other) noexcept {
  if (this != &other) {
    Graph dead(std::move(*this));  // this graph's executor stops before it is replaced
    rec_ = std::move(other.rec_);
    state_ = std::move(other.state_);
    mutex_ = std::move(other.mutex_);
  }
  return *this;
}
Graph::~Graph() {
  // The executor refers to the planned nodes and buffers: stop it first.
  if (state_ && state_->executor) {
    try {
      state_->executor->synchronize();
    } catch (...) {
    }
    state_->executor.reset();
  }
}

Graph Graph::record(const std::function<void(Recorder&)>& body, const RecordOptions& options) {
  return Graph(Recording::record(body, options));
}

Graph Graph::from(std::shared_ptr<const Recording> recording) {
  if (!recording || !recording->finished())
    throw InvalidArgument("Graph::from: the recording must be finished (RecordingBuilder::finish)");
  return Graph(std::move(recording));
}

namespace {

[[noreturn]] void not_built(const char* what) {
  throw InvalidArgument(std::string("Graph::") + what +
                        ": the graph is not built; call build() first");
}

std::string join_params(const Recording& rec) {
  std::string known;
  for (const auto& p : rec.param_names()) known += (known.empty() ? "" : ", ") + p;
  return known.empty() ? "none" : known;
}

char* at(const Array& buffer, int64_t byte_offset) {
  return static_cast<char*>(buffer.data()) + byte_offset;
}

// Fills the pointers of planned node `i` from the buffers' current memory (build and bind).
void plan_args(const Recording& rec, int i, const std::vector<Array>& buffers,
               detail::PlannedNode& out) {
  const NodeInfo& n = rec.nodes()[i];
  if (is_copy(n.kind)) {
    out.copy_src = at(buffers[n.arrays[0].buffer], n.arrays[0].byte_offset);
    out.copy_dst = at(buffers[n.arrays[1].buffer], n.arrays[1].byte_offset);
    return;
  }
  if (n.kind == NodeKind::fork) return;
  if (is_control(n.kind)) {
    out.cond =
        reinterpret_cast<const uint32_t*>(at(buffers[n.arrays[0].buffer], n.arrays[0].byte_offset));
    return;
  }
  for (std::size_t a = 0; a < n.arrays.size(); ++a) {
    const NodeArgInfo& arg = n.arrays[a];
    out.args.array(static_cast<int>(a)) =
        make_array_arg(at(buffers[arg.buffer], arg.byte_offset), arg.shape, arg.dtype, arg.strides);
  }
}

// bind(): buffer `b` moved, shapes and strides stay. Only the pointers into `b` change (the
// hot path of bind, so nothing else is recomputed).
void repoint_args(const Recording& rec, int i, int b, const std::vector<Array>& buffers,
                  detail::PlannedNode& out) {
  const NodeInfo& n = rec.nodes()[i];
  if (n.kind != NodeKind::kernel) return plan_args(rec, i, buffers, out);
  for (std::size_t a = 0; a < n.arrays.size(); ++a)
    if (n.arrays[a].buffer == b)
      out.args.array(static_cast<int>(a)).data = at(buffers[b], n.arrays[a].byte_offset);
}

// The whole planned form of recorded node `i` (at build).
void plan_node(const Recording& rec, int i, const std::vector<Array>& buffers, Device device,
               detail::PlannedNode& out) {
  const NodeInfo& n = rec.nodes()[i];
  out.label = n.label;
  out.deps = n.deps;
  out.traffic_bytes = 0;
  for (const NodeArgInfo& a : n.arrays) out.traffic_bytes += a.bytes;
  using Kind = detail::PlannedNode::Kind;
  out.bodies = n.bodies;
  out.waits = n.waits;
  if (is_copy(n.kind)) {
    out.kind = Kind::copy;
    out.copy_bytes = static_cast<std::size_t>(n.arrays[0].bytes);
  } else if (is_control(n.kind)) {
    out.kind = n.kind == NodeKind::if_       ? Kind::if_
               : n.kind == NodeKind::switch_ ? Kind::switch_
               : n.kind == NodeKind::while_  ? Kind::while_
                                             : Kind::fork;
  } else {
    out.call = detail::node_call(rec, i, device);
    out.args = ArgBlock(static_cast<int>(n.arrays.size()), static_cast<int>(n.scalars.size()));
    for (std::size_t s = 0; s < n.scalars.size(); ++s)
      out.args.scalar(static_cast<int>(s)) = n.scalars[s];
  }
  plan_args(rec, i, buffers, out);
}

detail::CudaOptions cuda_options(const BuildOptions& o) {
  detail::CudaOptions c;
  c.plain_if_only = o.plain_if_only;
  c.prioritize_chains = o.prioritize_chains;
  c.defer_side_roots = o.defer_side_roots;
  c.memsets_as_kernels = o.memsets_as_kernels;
  return c;
}

void check_device(Device device) {
  if (device.is_cuda() && device.ordinal() >= cuda_device_count())
    throw InvalidArgument("Graph::build: device " + device.str() + " is not attached (" +
                          std::to_string(cuda_device_count()) + " CUDA devices" +
                          (cuda_device_count() == 0 ? "; build on Device::cpu()" : "") + ")");
}

}  // namespace

void Graph::check(const char* what) const {
  if (!rec_)
    throw InvalidArgument(std::string("Graph::") + what +
                          ": this Graph was moved from; use the Graph it was moved into");
}

void Graph::build() {
  check("build");
  std::optional<Device> where;
  for (const BufferInfo& b : rec_->buffers()) {
    if (b.kind == BufferKind::internal) continue;
    const Device d = caller_array(b.id).device();
    if (where && *where != d)
      throw InvalidArgument("Graph::build: arrays live on " + where->str() + " and " + d.str() +
                            " (array '" + b.label + "'); pass the device to build(device)");
    where = d;
  }
  build(where.value_or(Device::cpu()), {});
}

namespace {

// Gives each of the graph's own arrays memory: laid out in the arena from offset 0 (aligned),
// or allocated. Returns their bytes; `offset` ends past the last one in the arena.
std::size_t place_own_arrays(const Recording& rec, Device device, const MemoryArena* arena,
                             std::vector<Array>& buffers, std::size_t& offset) {
  if (arena) {
    if (arena->device() != device)
      throw InvalidArgument("Graph::build: the arena lives on " + arena->device().str() +
                            " but the graph is being built for " + device.str());
    const std::size_t need = detail::arena_array_bytes(rec);
    if (arena->bytes() < need)
      throw InvalidArgument("Graph::build: the arena holds " + std::to_string(arena->bytes()) +
                            " bytes, the graph's own arrays need " + std::to_string(need) +
                            " (MemoryArena::bytes_for)");
  }
  std::size_t total = 0;
  offset = 0;
  for (const BufferInfo& b : rec.buffers()) {
    if (b.kind != BufferKind::internal || b.merged_into >= 0) continue;
    if (arena) {
      buffers[b.id] =
          Array::on_storage(arena->storage(), b.shape, b.dtype, static_cast<int64_t>(offset));
      offset += detail::arena_slot(b.bytes);
    } else {
      buffers[b.id] = Array::empty(b.shape, b.dtype, device);
    }
    total += b.bytes;
  }
  return total;
}

// Sums the workspaces the calls ask for and, with an arena, gives each call its own slot after
// the arrays (calls of one graph may run at once). Throws when the arena is too small, before
// anything is launched. Returns the workspaces' bytes.
std::size_t place_workspaces(const MemoryArena* arena, std::size_t offset, Device device,
                             std::vector<detail::PlannedNode>& nodes) {
  std::size_t total = 0;
  for (detail::PlannedNode& n : nodes) {
    if (!n.call) continue;
    const std::size_t bytes = n.call->workspace_bytes(n.args, device);
    total += bytes;
    if (!arena || bytes == 0) continue;
    n.workspace = static_cast<char*>(arena->storage()->data()) + offset;
    n.workspace_bytes = bytes;
    offset += detail::arena_slot(bytes);
  }
  if (arena && offset > arena->bytes())
    throw InvalidArgument("Graph::build: the arena holds " + std::to_string(arena->bytes()) +
                          " bytes, the graph's own arrays and its calls' workspaces need " +
                          std::to_string(offset) + " (MemoryArena::bytes_for)");
  return total;
}

}  // namespace

void Graph::build(Device device, const BuildOptions& options) {
  check("build");
  std::lock_guard<std::mutex> lock(*mutex_);
  check_device(device);
  if (options.stream && options.stream->device() != device)
    throw InvalidArgument("Graph::build: options.stream is on " + options.stream->device().str() +
                          " but the graph is being built for " + device.str());
  const auto& infos = rec_->buffers();
  // Everything is made in a new state and swapped in at the end: an error changes nothing.
  auto next = std::make_unique<State>();
  next->device = device;
  next->options = options;
  next->warn = state_->warn;
  next->rebuilds = state_->rebuilds;
  next->warned_rebuild = state_->warned_rebuild;
  next->buffers.resize(infos.size());
  for (const BufferInfo& b : infos) {
    if (b.kind == BufferKind::internal) continue;
    next->buffers[b.id] = caller_array(b.id);
    const Array& a = next->buffers[b.id];
    if (a.device() != device)
      throw InvalidArgument("Graph::build: " + std::string(buffer_kind_name(b.kind)) + " array '" +
                            b.label + "' lives on " + a.device().str() +
                            " but the graph is being built for " + device.str());
  }
  for (const NodeInfo& n : rec_->nodes()) {
    if (n.kind != NodeKind::kernel || rec_->kernel_of(n.id).def().binder) continue;
    const KernelImpl& impl = rec_->impl_of(n.id);
    if (device.is_cuda() ? !impl.has_cuda() : !impl.has_cpu())
      throw NotSupported("Graph::build: node " + std::to_string(n.id) + " '" + n.label +
                         "' (kernel " + n.kernel + ") has no " +
                         (device.is_cuda() ? "CUDA" : "CPU") +
                         " implementation for its dtypes; build the graph on " +
                         (device.is_cuda() ? "the CPU" : "a GPU") + " or give the kernel one");
  }
  std::size_t arena_offset = 0;
  next->allocated =
      place_own_arrays(*rec_, device, options.arena.get(), next->buffers, arena_offset);
  const auto& nodes = rec_->nodes();
  next->plan.nodes.resize(nodes.size());
  next->nodes_of_buffer.resize(infos.size());
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    plan_node(*rec_, static_cast<int>(i), next->buffers, device, next->plan.nodes[i]);
    for (const NodeArgInfo& a : nodes[i].arrays) {
      auto& list = next->nodes_of_buffer[a.buffer];
      if (list.empty() || list.back() != static_cast<int>(i)) list.push_back(static_cast<int>(i));
    }
  }
  next->workspaces = place_workspaces(options.arena.get(), arena_offset, device, next->plan.nodes);
  auto view_of = [&](const NodeArgInfo& r) {
    return Array::on_storage(next->buffers[r.buffer].storage(), r.shape, r.dtype,
                             next->buffers[r.buffer].byte_offset() + r.byte_offset);
  };
  for (const NodeArgInfo& r : rec_->results()) next->results.push_back(view_of(r));
  for (const Recording::DeviceCheck& c : rec_->checks()) next->checks.push_back(view_of(c.flags));
  next->plan.top = rec_->top();
  next->plan.control_flow = rec_->has_control_flow();
  next->stream = options.stream ? options.stream : std::make_shared<Stream>(device);
  next->trace = state_->trace;
  next->executor = make_executor(*next);  // tracing too, while on
  if (state_->executor) {
    state_->executor->synchronize();
    if (state_->trace) state_->executor->collect_trace();  // the old graph's records are kept
  }
  state_ = std::move(next);
}

// The same rule before and after build: no other array of the graph may share the memory of the
// array bound to param buffer `b` (before a build, the other arrays are the caller's params and
// externals).
void Graph::check_bind_memory(int b, const Array& array, const std::string& who) const {
  if (array.nbytes() == 0) return;
  const auto [lo, hi] = array.byte_span();
  for (const BufferInfo& other : rec_->buffers()) {
    if (other.id == b || other.merged_into >= 0) continue;
    const bool held = static_cast<std::size_t>(other.id) < state_->buffers.size() &&
                      state_->buffers[other.id].defined();
    if (!held && other.kind == BufferKind::internal) continue;  // no memory before build
    const Array& o = held ? state_->buffers[other.id] : rec_->caller_array(other.id);
    if (o.nbytes() == 0 || o.device() != array.device()) continue;
    const auto [olo, ohi] = o.byte_span();
    if (lo < ohi && olo < hi)
      throw InvalidArgument(who + ": the new array overlaps the graph's array '" + other.label +
                            "'; a param must not share memory with another array of the graph");
  }
}

// The array a param or external buffer holds now: what bind() gave it (before or after a
// build), else the recorded one.
const Array& Graph::caller_array(int buffer) const {
  if (static_cast<std::size_t>(buffer) < state_->buffers.size() &&
      state_->buffers[static_cast<std::size_t>(buffer)].defined())
    return state_->buffers[static_cast<std::size_t>(buffer)];
  return rec_->caller_array(buffer);
}

// A new executor over the plan (a build or a rebuild), tracing into the graph's sink while
// tracing is on.
std::unique_ptr<detail::Executor> Graph::make_executor(const State& s) const {
  auto executor = s.device.is_cuda() ? detail::make_cuda_executor(s.plan, s.device, *s.stream,
                                                                  cuda_options(s.options))
                                     : detail::make_cpu_executor(s.plan, s.options.threads);
  if (s.trace) executor->set_trace(s.trace.get());
  return executor;
}

const Array& Graph::buffer_array(int buffer) const {
  if (!built()) not_built("buffer_array");
  const auto& infos = rec_->buffers();
  if (buffer < 0 || buffer >= static_cast<int>(infos.size()) ||
      !state_->buffers[static_cast<std::size_t>(buffer)].defined())
    throw InvalidArgument("Graph::buffer_array: buffer " + std::to_string(buffer) +
                          " has no array (out of range, or merged into another)");
  return state_->buffers[static_cast<std::size_t>(buffer)];
}

bool Graph::built() const {
  check("built");
  return state_->executor != nullptr;
}
Device Graph::device() const {
  check("device");
  return state_->device;
}
std::string Graph::backend() const {
  return built() ? state_->executor->backend() : "";
}
std::string Graph::schedule() const {
  return built() ? state_->executor->schedule() : "";
}
int Graph::native_node_count() const {
  if (!built()) not_built("native_node_count");
  return state_->executor->native_node_count();
}
void* Graph::native_graph() const {
  return built() ? state_->executor->native_graph() : nullptr;
}
void* Graph::native_graph_exec() const {
  return built() ? state_->executor->native_graph_exec() : nullptr;
}
std::size_t Graph::allocated_bytes() const {
  check("allocated_bytes");
  return state_->allocated;
}
std::size_t Graph::workspace_bytes() const {
  check("workspace_bytes");
  return state_->workspaces;
}
int Graph::rebuild_count() const {
  check("rebuild_count");
  return state_->rebuilds;
}
const Recording& Graph::recording() const {
  check("recording");
  return *rec_;
}

void Graph::set_warning_handler(std::function<void(const std::string&)> handler) {
  check("set_warning_handler");
  std::lock_guard<std::mutex> lock(*mutex_);
  state_->warn = handler ? std::move(handler) : [](const std::string&) {};
}

const Stream& Graph::stream() const {
  if (!built()) not_built("stream");
  return *state_->stream;
}

void Graph::launch(int n) {
  check("launch");
  std::lock_guard<std::mutex> lock(*mutex_);
  if (!state_->executor) not_built("launch");
  if (n < 0) throw InvalidArgument("Graph::launch: n must be >= 0, got " + std::to_string(n));
  state_->executor->launch(n);
}

void Graph::synchronize() {
  check("synchronize");
  std::lock_guard<std::mutex> lock(*mutex_);
  if (!state_->executor) not_built("synchronize");
  state_->executor->synchronize();
}

const std::vector<Array>& Graph::operator()() {
  return (*this)(1);
}

const std::vector<Array>& Graph::operator()(int n) {
  check("operator()");
  // One launch-and-wait at a time: a second thread's g() starts after this one's ends.
  std::lock_guard<std::mutex> lock(*mutex_);
  if (!state_->executor) not_built("operator()");
  if (n < 0) throw InvalidArgument("Graph::operator(): n must be >= 0, got " + std::to_string(n));
  state_->executor->launch(n);
  state_->executor->synchronize();
  // What the device found wrong (the last launch's flags): the first check that raises throws.
  const auto& checks = rec_->checks();
  for (std::size_t i = 0; i < checks.size(); ++i) checks[i].raise(state_->checks[i]);
  return state_->results;
}

const std::vector<Array>& Graph::results() const {
  if (!built()) not_built("results");
  return state_->results;
}

void Graph::bind(const std::string& name, const Array& array) {
  check("bind");
  std::lock_guard<std::mutex> lock(*mutex_);
  const int b = rec_->param_buffer(name);
  if (b < 0)
    throw InvalidArgument("Graph::bind: no param named '" + name +
                          "' (params: " + join_params(*rec_) + ")");
  const std::string who = "Graph::bind('" + name + "')";
  const Array& old = caller_array(b);
  if (!array.defined())
    throw InvalidArgument(who + ": the array is undefined (a default-constructed Array)");
  if (array.shape() != old.shape() || array.dtype() != old.dtype() ||
      array.device() != old.device())
    throw InvalidArgument(who + ": the new array is " + array.describe() + " but the param is " +
                          old.describe() + "; shape, dtype and device must stay the same");
  if (!array.is_contiguous()) throw InvalidArgument(who + ": the new array must be contiguous");
  check_bind_memory(b, array, who);
  if (!built()) {
    // Not built yet: remember the array; build() picks it up.
    state_->buffers.resize(rec_->buffers().size());
    state_->buffers[b] = array;
    return;
  }
  State& s = *state_;
  const Array previous = s.buffers[b];
  auto point_at = [&](const Array& a) {
    s.buffers[b] = a;
    for (int i : s.nodes_of_buffer[b]) repoint_args(*rec_, i, b, s.buffers, s.plan.nodes[i]);
    const auto& results = rec_->results();
    for (std::size_t r = 0; r < results.size(); ++r)
      if (results[r].buffer == b)
        s.results[r] = Array::on_storage(a.storage(), results[r].shape, results[r].dtype,
                                         a.byte_offset() + results[r].byte_offset);
  };
  point_at(array);
  bool patched = false;
  std::string why;
  try {
    patched = s.executor->patch(s.nodes_of_buffer[b], why);
  } catch (const Error& e) {
    why = e.what();  // a failed patch is a reason to rebuild, not to fail the bind
  }
  if (patched) return;
  // A node eagle cannot patch holds the array: build the backend again over the same buffers.
  // On failure the graph goes back to the previous array, rebuilt, and the error propagates.
  s.executor->synchronize();
  if (s.trace) s.executor->collect_trace();
  std::unique_ptr<detail::Executor> rebuilt;
  try {
    rebuilt = make_executor(s);
  } catch (...) {
    point_at(previous);  // the results on buffer b too (no other result moved)
    s.executor.reset();
    s.executor = make_executor(s);
    throw;
  }
  s.executor = std::move(rebuilt);
  ++s.rebuilds;
  if (!s.warned_rebuild) {
    s.warned_rebuild = true;
    s.warn(who + ": a node holding the array cannot be patched in place (" + why +
           "); the graph was rebuilt. Further rebuilds of this graph are silent.");
  }
}

void Graph::set_tracing(bool on) {
  std::lock_guard<std::mutex> lock(*mutex_);
  check("set_tracing");
  if (!state_->executor)
    throw InvalidArgument("Graph::set_tracing: build the graph first (tracing times its launches)");
  if (on == static_cast<bool>(state_->trace)) return;
  if (!on) {
    state_->executor->synchronize();
    state_->executor->set_trace(nullptr);
    state_->trace.reset();
    return;
  }
  auto sink = std::make_shared<detail::TraceSink>();
  state_->executor->set_trace(sink.get());  // NotSupported on a GPU without CUPTI: nothing changed
  state_->trace = std::move(sink);
}

std::vector<TraceEvent> Graph::trace() const {
  std::lock_guard<std::mutex> lock(*mutex_);
  check("trace");
  std::vector<TraceEvent> out;
  if (!state_->trace) return out;
  state_->executor->collect_trace();
  std::lock_guard<std::mutex> records(state_->trace->mutex);
  // Workers (CPU) and streams (GPU), numbered in order of first appearance.
  std::vector<std::thread::id> threads;
  std::vector<int64_t> streams;
  auto number = [](auto& seen, const auto& key) {
    auto at = std::find(seen.begin(), seen.end(), key);
    if (at == seen.end()) at = seen.insert(seen.end(), key);
    return static_cast<int>(at - seen.begin());
  };
  for (const auto& r : state_->trace->records) {
    TraceEvent e;
    e.node = r.node;
    if (r.node >= 0) {
      const NodeInfo& n = rec_->nodes()[static_cast<std::size_t>(r.node)];
      e.label = n.label;
      e.scope = n.scope;
      e.kernel = n.kernel;
    } else {
      e.label = e.kernel = r.device_kernel;
    }
    e.launch = r.launch;
    e.thread = r.stream >= 0 ? number(streams, r.stream) : number(threads, r.thread);
    e.begin_ns = r.begin_ns;
    e.end_ns = r.end_ns;
    e.device_kernel = r.device_kernel;
    out.push_back(std::move(e));
  }
  return out;
}

void Graph::clear_trace() {
  std::lock_guard<std::mutex> lock(*mutex_);
  check("clear_trace");
  if (!state_->trace) return;
  state_->executor->collect_trace();  // what ran before now is dropped too
  std::lock_guard<std::mutex> records(state_->trace->mutex);
  state_->trace->records.clear();
}

}  // namespace eagle
