// The recording's front: building one, what it shows once finished, and its results.
#include "eagle/graph/recording.hpp"

#include "eagle/core/error.hpp"
#include "eagle/kernel/tape.hpp"
#include "graph/state.hpp"

namespace eagle {

Recording::Recording() : s_(std::make_unique<State>()) {
  s_->self = this;
}
Recording::~Recording() = default;

const std::vector<NodeInfo>& Recording::nodes() const {
  return s_->nodes;
}
const std::vector<int>& Recording::top() const {
  return s_->top;
}
const std::vector<BufferInfo>& Recording::buffers() const {
  return s_->buffers;
}
const std::vector<std::string>& Recording::param_names() const {
  return s_->param_names;
}
const std::vector<NodeArgInfo>& Recording::results() const {
  return s_->results;
}
const std::vector<Recording::DeviceCheck>& Recording::checks() const {
  return s_->checks;
}
bool Recording::finished() const {
  return s_->finished;
}
const RecordOptions& Recording::options() const {
  return s_->options;
}
const std::map<std::string, NodeArgInfo>& Recording::names() const {
  return s_->names;
}
const Snapshot& Recording::snapshot(int node, int slot) const {
  if (node < 0 || node >= static_cast<int>(s_->nodes.size()) || slot < 0 ||
      slot >= static_cast<int>(s_->snapshots[static_cast<std::size_t>(node)].size()))
    throw InvalidArgument("Recording::snapshot: node " + std::to_string(node) +
                          " has no argument " + std::to_string(slot));
  return s_->snapshots[static_cast<std::size_t>(node)][static_cast<std::size_t>(slot)];
}
std::size_t Recording::saved_bytes() const {
  std::size_t total = 0;
  for (const NodeInfo& n : s_->nodes) {
    if (n.kind == NodeKind::save) {
      total += static_cast<std::size_t>(n.arrays[1].bytes);
    } else if (n.kind == NodeKind::kernel && kernel_of(n.id) == kernels::tape_write()) {
      // one per tape
      total += static_cast<std::size_t>(n.arrays[2].bytes);
    }
  }
  return total;
}

bool Recording::has_control_flow() const {
  for (const NodeInfo& n : s_->nodes)
    if (is_control(n.kind)) return true;
  return false;
}

std::vector<std::pair<int, int>> Recording::edges() const {
  std::vector<std::pair<int, int>> out;
  for (const NodeInfo& n : s_->nodes)
    for (int d : n.deps) out.emplace_back(d, n.id);
  return out;
}

int Recording::param_buffer(const std::string& name) const {
  auto it = s_->param_by_name.find(name);
  if (it == s_->param_by_name.end()) return -1;
  // After finishing, a shadow may follow; the param itself keeps its id.
  return it->second;
}

namespace {

const Array& array_of(const Recording::State& s, int buffer, BufferKind kind, const char* who) {
  if (buffer < 0 || buffer >= static_cast<int>(s.buffers.size()) ||
      s.buffers[static_cast<std::size_t>(buffer)].kind != kind)
    throw InvalidArgument(std::string(who) + ": array " + std::to_string(buffer) + " is not " +
                          (kind == BufferKind::param ? "a param" : "an external array"));
  return s.arrays[static_cast<std::size_t>(buffer)];
}

}  // namespace

const Array& Recording::param_initial(int buffer) const {
  return array_of(*s_, buffer, BufferKind::param, "Recording::param_initial");
}
const Array& Recording::external_array(int buffer) const {
  return array_of(*s_, buffer, BufferKind::external, "Recording::external_array");
}

const Array& Recording::caller_array(int buffer) const {
  if (buffer >= 0 && buffer < static_cast<int>(s_->buffers.size()) &&
      s_->buffers[static_cast<std::size_t>(buffer)].kind == BufferKind::external)
    return external_array(buffer);
  return param_initial(buffer);
}

const Kernel& Recording::kernel_of(int node) const {
  if (node < 0 || node >= static_cast<int>(s_->nodes.size()) ||
      !s_->kernels[static_cast<std::size_t>(node)])
    throw InvalidArgument("Recording::kernel_of: node " + std::to_string(node) +
                          " is not a kernel node");
  return *s_->kernels[static_cast<std::size_t>(node)];
}
const KernelImpl& Recording::impl_of(int node) const {
  kernel_of(node);
  return s_->impls[static_cast<std::size_t>(node)];
}

RecordingBuilder::RecordingBuilder(const RecordOptions& options)
    : rec_(std::shared_ptr<Recording>(new Recording())), recorder_(rec_.get()) {
  rec_->s_->options = options;
}

std::shared_ptr<const Recording> RecordingBuilder::finish() {
  if (!rec_) throw InvalidArgument("RecordingBuilder::finish: the builder was finished already");
  rec_->s_->finish();
  std::shared_ptr<const Recording> out = std::move(rec_);
  rec_.reset();
  return out;
}

std::shared_ptr<const Recording> Recording::record(const std::function<void(Recorder&)>& body,
                                                   const RecordOptions& options) {
  if (!body) throw InvalidArgument("Graph::record: the body is empty");
  RecordingBuilder builder(options);
  body(builder.recorder());
  return builder.finish();
}

void Recorder::result(const std::vector<Value>& values) {
  Recording::State& s = *rec_->s_;
  s.check_open("Recorder::result");
  if (s.results_set) throw InvalidArgument("Recorder::result: the result is already set");
  for (std::size_t i = 0; i < values.size(); ++i) {
    const std::string who = "Recorder::result: value " + std::to_string(i);
    const auto& v = s.value(values[i], who);
    s.check_readable(v.buffer, who);
    if (!v.strides.empty())
      throw InvalidArgument(who + " is a strided view; copy it into a contiguous array first");
  }
  for (const Value& v : values) s.result_values.push_back(v.id());
  s.results_set = true;
}

void Recorder::check(const Value& flags, std::function<void(const Array&)> raise) {
  Recording::State& s = *rec_->s_;
  s.check_open("Recorder::check");
  const std::string who = "Recorder::check";
  if (!raise) throw InvalidArgument(who + ": raise is empty");
  if (!s.open.empty())
    throw InvalidArgument(who +
                          ": call it at the top level of the recording, not inside a "
                          "device construct or fork branch (the flags are read where the graph "
                          "ends)");
  const auto& v = s.value(flags, who + ": flags");
  if (s.buffers[static_cast<std::size_t>(v.buffer)].kind != BufferKind::internal)
    throw InvalidArgument(who +
                          ": flags must be written by a call of this recording, not a "
                          "param or external array");
  s.check_readable(v.buffer, who + ": flags");
  if (!v.strides.empty())
    throw InvalidArgument(who + ": flags is a strided view; check a contiguous array");
  s.check_values.emplace_back(flags.id(), std::move(raise));
}

}  // namespace eagle
