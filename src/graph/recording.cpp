#include "eagle/graph/recording.hpp"

#include <algorithm>
#include <set>

#include "eagle/core/error.hpp"
#include "eagle/kernel/cells.hpp"
#include "eagle/kernel/standard.hpp"

namespace eagle {

std::string_view buffer_kind_name(BufferKind kind) {
  switch (kind) {
    case BufferKind::internal:
      return "internal";
    case BufferKind::param:
      return "param";
    case BufferKind::external:
      return "external";
  }
  return "?";
}

namespace {

std::size_t bytes_of(const Shape& shape, DType dtype) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return static_cast<std::size_t>(n) * itemsize(dtype);
}

bool overlaps(int64_t a0, int64_t a1, int64_t b0, int64_t b1) {
  return a0 < b1 && b0 < a1;
}

std::string node_name(const NodeInfo& n) {
  return "node " + std::to_string(n.id) + " '" + n.label + "'";
}

}  // namespace

// ---- Value -------------------------------------------------------------------------------

const Shape& Value::shape() const {
  return rec_->value(*this, "Value::shape").shape;
}
DType Value::dtype() const {
  return rec_->value(*this, "Value::dtype").dtype;
}
int64_t Value::numel() const {
  int64_t n = 1;
  for (int64_t d : shape()) n *= d;
  return n;
}

Value& Value::operator=(const Value& other) {
  if (this != &other && rec_ != nullptr && other.rec_ == rec_ && id_ >= 0 && other.id_ >= 0)
    rec_->merge_rebound(id_, other.id_);
  rec_ = other.rec_;
  id_ = other.id_;
  return *this;
}

Value Value::slice(int64_t begin, int64_t end) const {
  const auto& v = rec_->value(*this, "Value::slice");
  if (v.shape.empty()) throw InvalidArgument("Value::slice: a 0-d value has no rows");
  if (begin < 0 || end < begin || end > v.shape[0])
    throw InvalidArgument("Value::slice: range [" + std::to_string(begin) + ", " +
                          std::to_string(end) + ") must lie within [0, " +
                          std::to_string(v.shape[0]) + "]");
  Shape s = v.shape;
  s[0] = end - begin;
  const int64_t row_bytes =
      static_cast<int64_t>(bytes_of(Shape(v.shape.begin() + 1, v.shape.end()), v.dtype));
  return Value(rec_, rec_->new_value(v.buffer, v.byte_offset + begin * row_bytes, s, v.dtype));
}

Value Value::reshape(const Shape& shape) const {
  const auto& v = rec_->value(*this, "Value::reshape");
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0)
      throw InvalidArgument("Value::reshape: shape " + shape_str(shape) + " has a negative size");
    n *= d;
  }
  if (n != numel())
    throw InvalidArgument("Value::reshape: " + shape_str(shape) + " holds " + std::to_string(n) +
                          " elements but the value has " + std::to_string(numel()));
  return Value(rec_, rec_->new_value(v.buffer, v.byte_offset, shape, v.dtype));
}

// ---- Recording internals -----------------------------------------------------------------

const Recording::ValueData& Recording::value(const Value& v, const std::string& what) const {
  if (v.rec_ != this || v.id_ < 0 || v.id_ >= static_cast<int>(values_.size()))
    throw InvalidArgument(what + ": the value does not belong to this recording");
  return values_[v.id_];
}

int Recording::new_buffer(BufferKind kind, const Shape& shape, DType dtype, std::string label) {
  const int id = static_cast<int>(buffers_.size());
  buffers_.push_back(
      BufferInfo{id, std::move(label), kind, shape, dtype, bytes_of(shape, dtype), -1});
  arrays_.emplace_back();
  scope_.push_back(innermost_condition());
  return id;
}

int Recording::new_value(int buffer, int64_t byte_offset, const Shape& shape, DType dtype) {
  values_.push_back(ValueData{buffer, byte_offset, shape, dtype});
  return static_cast<int>(values_.size()) - 1;
}

int Recording::add_node(NodeInfo node, const Kernel* kernel, KernelImpl impl) {
  node.id = static_cast<int>(nodes_.size());
  node.parent = open_.empty() ? -1 : open_.back().first;
  if (!open_.empty() && nodes_[open_.back().first].kind == NodeKind::fork) {
    node.waits = std::move(pending_waits_);
    pending_waits_.clear();
  }
  current_list().push_back(node.id);
  nodes_.push_back(std::move(node));
  kernels_.push_back(kernel ? std::make_unique<Kernel>(*kernel) : nullptr);
  impls_.push_back(impl);
  return static_cast<int>(nodes_.size()) - 1;
}

std::vector<int>& Recording::current_list() {
  if (open_.empty()) return top_;
  return nodes_[open_.back().first].bodies[open_.back().second];
}

bool Recording::has_control_flow() const {
  for (const NodeInfo& n : nodes_)
    if (is_control(n.kind)) return true;
  return false;
}

std::string_view node_kind_name(NodeKind kind) {
  switch (kind) {
    case NodeKind::kernel:
      return "kernel";
    case NodeKind::copy_in:
      return "copy_in";
    case NodeKind::if_:
      return "if";
    case NodeKind::switch_:
      return "switch";
    case NodeKind::while_:
      return "while";
    case NodeKind::fork:
      return "parallel";
  }
  return "?";
}

// Every access a node makes, its whole body included: what orders it in its own list.
void Recording::subtree_accesses(int id, std::vector<NodeArgInfo>& out) const {
  const NodeInfo& n = nodes_[id];
  out.insert(out.end(), n.arrays.begin(), n.arrays.end());
  for (const auto& body : n.bodies)
    for (int child : body) subtree_accesses(child, out);
}

void Recording::rewrite_buffer(int id, int from, int to) {
  for (NodeArgInfo& a : nodes_[id].arrays)
    if (a.buffer == from) a.buffer = to;
  for (const auto& body : nodes_[id].bodies)
    for (int child : body) rewrite_buffer(child, from, to);
}

// A param the graph writes gets a private copy. The copy_in goes right before the first
// top-level item that writes the param (a whole loop, if the write is inside one); from that
// item on every access goes to the copy, so a loop's later turns see what earlier ones wrote.
// Nodes before it keep reading the param itself.
void Recording::shadow_written_params() {
  const int buffers = static_cast<int>(buffers_.size());
  for (int param = 0; param < buffers; ++param) {
    if (buffers_[param].kind != BufferKind::param) continue;
    std::size_t first = top_.size();
    for (std::size_t t = 0; t < top_.size() && first == top_.size(); ++t) {
      std::vector<NodeArgInfo> acc;
      subtree_accesses(top_[t], acc);
      for (const NodeArgInfo& a : acc)
        if (a.buffer == param && writes(a.access)) first = t;
    }
    if (first == top_.size()) continue;
    const BufferInfo p = buffers_[param];
    const int shadow = new_buffer(BufferKind::internal, p.shape, p.dtype, p.label + ".copy");
    buffers_[shadow].shadow_of = param;
    for (std::size_t t = first; t < top_.size(); ++t) rewrite_buffer(top_[t], param, shadow);
    for (NodeArgInfo& r : results_)
      if (r.buffer == param) r.buffer = shadow;
    NodeInfo copy;
    copy.kind = NodeKind::copy_in;
    copy.label = "copy_in " + p.label;
    copy.kernel = "copy_in";
    const auto bytes = static_cast<int64_t>(p.bytes);
    copy.arrays = {{"src", Access::read, param, 0, bytes, p.shape, p.dtype},
                   {"dst", Access::write, shadow, 0, bytes, p.shape, p.dtype}};
    const int id = add_node(std::move(copy), nullptr, KernelImpl{});
    top_.pop_back();  // add_node appended it; it belongs before `first`
    top_.insert(top_.begin() + static_cast<std::ptrdiff_t>(first), id);
  }
}

// Node ids in program order (a control node before its bodies), so ids read as a schedule.
void Recording::renumber() {
  std::vector<int> order;
  std::function<void(const std::vector<int>&)> visit = [&](const std::vector<int>& list) {
    for (int id : list) {
      order.push_back(id);
      for (const auto& body : nodes_[id].bodies) visit(body);
    }
  };
  visit(top_);
  std::vector<int> new_id(nodes_.size());
  for (std::size_t i = 0; i < order.size(); ++i) new_id[order[i]] = static_cast<int>(i);
  std::vector<NodeInfo> nodes(nodes_.size());
  std::vector<std::unique_ptr<Kernel>> kernels(nodes_.size());
  std::vector<KernelImpl> impls(nodes_.size());
  for (std::size_t old = 0; old < nodes_.size(); ++old) {
    NodeInfo n = std::move(nodes_[old]);
    n.id = new_id[old];
    if (n.parent >= 0) n.parent = new_id[n.parent];
    for (auto& body : n.bodies)
      for (int& c : body) c = new_id[c];
    for (int& w : n.waits) w = new_id[w];
    kernels[n.id] = std::move(kernels_[old]);
    impls[n.id] = impls_[old];
    nodes[n.id] = std::move(n);
  }
  for (int& id : top_) id = new_id[id];
  nodes_ = std::move(nodes);
  kernels_ = std::move(kernels);
  impls_ = std::move(impls);
}

// Within one node, a written argument may overlap another only as the very same view of a
// per-sample kernel (an in-place update); anything else is a race between the kernel's threads.
void Recording::check_races(const NodeInfo& node, bool per_sample) const {
  for (std::size_t i = 0; i < node.arrays.size(); ++i) {
    for (std::size_t j = i + 1; j < node.arrays.size(); ++j) {
      const NodeArgInfo& a = node.arrays[i];
      const NodeArgInfo& b = node.arrays[j];
      if (a.buffer != b.buffer || !(writes(a.access) || writes(b.access))) continue;
      if (!overlaps(a.byte_offset, a.byte_offset + a.bytes, b.byte_offset, b.byte_offset + b.bytes))
        continue;
      const bool same_view =
          a.byte_offset == b.byte_offset && a.bytes == b.bytes && a.dtype == b.dtype;
      if (same_view && per_sample) continue;
      throw RecordError("race refused: " + node_name(node) +
                        " passes overlapping views of array '" + buffers_[a.buffer].label +
                        "' as '" + a.param + "' (" + std::string(access_name(a.access)) +
                        ") and '" + b.param + "' (" + std::string(access_name(b.access)) + ")" +
                        (same_view
                             ? "; only a per-sample kernel may update an array in place"
                             : "; a kernel may write in place only over exactly the same view"));
    }
  }
}

// Edges from accesses in program order within one list (the top level or one arm):
// read-after-write, write-after-read and write-after-write on overlapping byte ranges of the
// same buffer. A control node counts with every access of its bodies.
void Recording::infer_edges(std::vector<int>& list) {
  struct Access_ {
    int node;
    int64_t begin, end;
    bool write;
  };
  std::vector<std::vector<Access_>> live(buffers_.size());
  for (int id : list) {
    std::vector<NodeArgInfo> accesses;
    subtree_accesses(id, accesses);
    std::set<int> deps;
    for (const NodeArgInfo& a : accesses) {
      const int64_t begin = a.byte_offset, end = a.byte_offset + a.bytes;
      for (const Access_& prior : live[a.buffer])
        if (prior.node != id && (prior.write || writes(a.access)) &&
            overlaps(prior.begin, prior.end, begin, end))
          deps.insert(prior.node);
    }
    for (const NodeArgInfo& a : accesses) {
      auto& prior = live[a.buffer];
      const int64_t begin = a.byte_offset, end = a.byte_offset + a.bytes;
      // Accesses an unconditional write covers are ordered before it; later nodes need only it.
      if (writes(a.access) && !is_control(nodes_[id].kind)) {
        prior.erase(
            std::remove_if(prior.begin(), prior.end(),
                           [&](const Access_& p) { return p.begin >= begin && p.end <= end; }),
            prior.end());
      }
      prior.push_back({id, begin, end, writes(a.access)});
    }
    nodes_[id].deps.assign(deps.begin(), deps.end());
    for (auto& body : nodes_[id].bodies) {
      if (nodes_[id].kind != NodeKind::fork) {
        infer_edges(body);
        continue;
      }
      // A fork's branch runs its items in order: each waits for the one before it.
      for (std::size_t k = 0; k < body.size(); ++k) {
        nodes_[body[k]].deps.clear();
        if (k > 0) nodes_[body[k]].deps.push_back(body[k - 1]);
        for (auto& inner : nodes_[body[k]].bodies) infer_edges(inner);
      }
    }
  }
}

void Recording::finish() {
  if (!open_.empty()) throw RecordError("Recording: a device construct was left open");
  for (int id : result_values_) {
    const ValueData& v = values_[id];
    results_.push_back({"result", Access::read, v.buffer, v.byte_offset,
                        static_cast<int64_t>(bytes_of(v.shape, v.dtype)), v.shape, v.dtype});
  }
  shadow_written_params();
  renumber();
  infer_edges(top_);
  finished_ = true;
}

std::vector<std::pair<int, int>> Recording::edges() const {
  std::vector<std::pair<int, int>> out;
  for (const NodeInfo& n : nodes_)
    for (int d : n.deps) out.emplace_back(d, n.id);
  return out;
}

int Recording::param_buffer(const std::string& name) const {
  for (const BufferInfo& b : buffers_)
    if (b.kind == BufferKind::param && b.label == name) return b.id;
  return -1;
}

const Array& Recording::param_initial(int buffer) const {
  return arrays_.at(buffer);
}
const Array& Recording::external_array(int buffer) const {
  return arrays_.at(buffer);
}

std::shared_ptr<const Recording> Recording::record(const std::function<void(Recorder&)>& body) {
  std::shared_ptr<Recording> rec(new Recording());
  Recorder r(rec.get());
  body(r);
  rec->finish();
  return rec;
}

// ---- Recorder ----------------------------------------------------------------------------

namespace {

void check_open(bool finished) {
  if (finished)
    throw InvalidArgument(
        "Recorder: the recording has finished; record calls only inside the "
        "function passed to Graph::record");
}

}  // namespace

// Refuses a caller's array that overlaps another one the recording already holds: the graph
// could not order accesses made through two different names for the same memory.
void Recording::check_distinct_memory(const Array& a, const std::string& what) const {
  const auto [lo, hi] = a.byte_span();
  for (const BufferInfo& b : buffers_) {
    const Array& other = arrays_[b.id];
    if (!other.defined() || other.device() != a.device()) continue;
    const auto [olo, ohi] = other.byte_span();
    if (overlaps(static_cast<int64_t>(lo), static_cast<int64_t>(hi), static_cast<int64_t>(olo),
                 static_cast<int64_t>(ohi)))
      throw RecordError(what + " overlaps the memory of " + std::string(buffer_kind_name(b.kind)) +
                        " array '" + b.label +
                        "'; pass one array and take views of it (Value::slice) instead");
  }
}

Value Recorder::param(const std::string& name, const Array& initial) {
  check_open(rec_->finished_);
  if (name.empty()) throw InvalidArgument("Recorder::param: name must not be empty");
  if (rec_->param_buffer(name) >= 0)
    throw InvalidArgument("Recorder::param: a param named '" + name + "' already exists");
  if (!initial.defined())
    throw InvalidArgument("Recorder::param: param '" + name + "' needs a defined array");
  if (!initial.is_contiguous())
    throw InvalidArgument("Recorder::param: param '" + name + "' must be contiguous");
  rec_->check_distinct_memory(initial, "param '" + name + "'");
  const int b = rec_->new_buffer(BufferKind::param, initial.shape(), initial.dtype(), name);
  rec_->arrays_[b] = initial;
  rec_->param_names_.push_back(name);
  return Value(rec_, rec_->new_value(b, 0, initial.shape(), initial.dtype()));
}

Value Recorder::external(const Array& array, const std::string& label) {
  check_open(rec_->finished_);
  if (label.empty()) throw InvalidArgument("Recorder::external: label must not be empty");
  if (!array.defined())
    throw InvalidArgument("Recorder::external: '" + label + "' needs a defined array");
  if (!array.is_contiguous())
    throw InvalidArgument("Recorder::external: '" + label + "' must be contiguous");
  rec_->check_distinct_memory(array, "external array '" + label + "'");
  const int b = rec_->new_buffer(BufferKind::external, array.shape(), array.dtype(), label);
  rec_->arrays_[b] = array;
  return Value(rec_, rec_->new_value(b, 0, array.shape(), array.dtype()));
}

Value Recorder::empty(const Shape& shape, DType dtype, const std::string& label) {
  check_open(rec_->finished_);
  for (int64_t d : shape)
    if (d < 0)
      throw InvalidArgument("Recorder::empty: shape " + shape_str(shape) + " has a negative size");
  const int b =
      rec_->new_buffer(BufferKind::internal, shape, dtype,
                       label.empty() ? "empty#" + std::to_string(rec_->buffers_.size()) : label);
  return Value(rec_, rec_->new_value(b, 0, shape, dtype));
}

std::vector<Value> Recorder::call_all(const Kernel& kernel, const std::vector<Arg>& args,
                                      const CallOptions& options) {
  check_open(rec_->finished_);
  const KernelDef& def = kernel.def();
  const std::string who = "kernel " + def.name;
  std::vector<Value> inputs;
  std::vector<Scalar> scalars;
  for (const Arg& a : args) {
    if (const Value* v = std::get_if<Value>(&a.get())) {
      inputs.push_back(*v);
    } else {
      scalars.push_back(std::get<Scalar>(a.get()));
    }
  }
  if (static_cast<int>(inputs.size()) != kernel.num_inputs())
    throw InvalidArgument(who + ": expects " + std::to_string(kernel.num_inputs()) +
                          " array arguments, got " + std::to_string(inputs.size()));
  if (scalars.size() != def.scalars.size())
    throw InvalidArgument(who + ": expects " + std::to_string(def.scalars.size()) +
                          " scalar arguments, got " + std::to_string(scalars.size()));
  if (options.buffers.size() > static_cast<std::size_t>(kernel.num_outputs()))
    throw InvalidArgument(who + ": " + std::to_string(options.buffers.size()) +
                          " buffers given but the kernel has " +
                          std::to_string(kernel.num_outputs()) + " outputs");
  std::vector<ArrayMeta> metas;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const auto& v = rec_->value(inputs[i], who + ": array argument " + std::to_string(i));
    metas.push_back({v.shape, v.dtype});
  }
  std::vector<ScalarArg> sargs;
  for (std::size_t i = 0; i < scalars.size(); ++i)
    sargs.push_back(scalars[i].as(def.scalars[i].kind));
  std::vector<ArrayMeta> out_metas = def.infer(metas, sargs);
  const std::string label = options.label.empty() ? def.name : options.label;

  // Validate every supplied buffer before anything is added, so an error changes nothing.
  std::vector<std::string> out_names;
  for (const auto& p : def.arrays)
    if (!reads(p.access)) out_names.push_back(p.name);
  for (std::size_t o = 0; o < out_metas.size(); ++o) {
    const std::string what = who + ": output '" + out_names[o] + "'";
    const bool free_shape = out_metas[o].shape == Shape{-1};
    ArrayMeta got;
    if (o >= options.buffers.size()) {
      if (free_shape)
        throw InvalidArgument(what +
                              " has no shape determined by the inputs; supply it with buffer=");
      continue;
    }
    if (const Array* a = std::get_if<Array>(&options.buffers[o])) {
      if (!a->defined()) throw InvalidArgument(what + ": buffer= array is not defined");
      if (!a->is_contiguous()) throw InvalidArgument(what + ": buffer= array must be contiguous");
      got = {a->shape(), a->dtype()};
    } else {
      const auto& v = rec_->value(std::get<Value>(options.buffers[o]), what + " buffer=");
      got = {v.shape, v.dtype};
    }
    if (!free_shape && (got.shape != out_metas[o].shape || got.dtype != out_metas[o].dtype))
      throw InvalidArgument(what + " must be " + std::string(dtype_name(out_metas[o].dtype)) +
                            shape_str(out_metas[o].shape) + " but buffer= is " +
                            std::string(dtype_name(got.dtype)) + shape_str(got.shape));
    out_metas[o] = got;
  }
  std::vector<DType> dtypes;
  {
    std::size_t in = 0, out = 0;
    for (const auto& p : def.arrays)
      dtypes.push_back(reads(p.access) ? metas[in++].dtype : out_metas[out++].dtype);
  }
  const KernelImpl impl = def.select(dtypes);  // may decline with NotSupported

  // Resolve output buffers: a caller's array, an existing value, or a new internal buffer.
  std::vector<int> out_values;
  for (std::size_t o = 0; o < out_metas.size(); ++o) {
    if (o < options.buffers.size()) {
      if (const Array* a = std::get_if<Array>(&options.buffers[o])) {
        int existing = -1;
        for (const BufferInfo& b : rec_->buffers_)
          if (b.kind == BufferKind::external && rec_->arrays_[b.id].data() == a->data() &&
              rec_->arrays_[b.id].shape() == a->shape() &&
              rec_->arrays_[b.id].dtype() == a->dtype())
            existing = b.id;
        if (existing < 0) {
          rec_->check_distinct_memory(*a, who + ": output '" + out_names[o] + "' buffer=");
          existing = rec_->new_buffer(BufferKind::external, a->shape(), a->dtype(),
                                      label + "." + out_names[o]);
          rec_->arrays_[existing] = *a;
        }
        out_values.push_back(rec_->new_value(existing, 0, a->shape(), a->dtype()));
      } else {
        out_values.push_back(std::get<Value>(options.buffers[o]).id());
      }
      continue;
    }
    const int b =
        rec_->new_buffer(BufferKind::internal, out_metas[o].shape, out_metas[o].dtype,
                         label + "#" + std::to_string(rec_->nodes_.size()) + "." + out_names[o]);
    out_values.push_back(rec_->new_value(b, 0, out_metas[o].shape, out_metas[o].dtype));
  }

  // The node's arguments in parameter order. Written params get their private copy first.
  std::vector<int> arg_values;
  {
    std::size_t in = 0, out = 0;
    for (const auto& p : def.arrays)
      arg_values.push_back(reads(p.access) ? inputs[in++].id() : out_values[out++]);
  }
  NodeInfo node;
  node.kind = NodeKind::kernel;
  node.label = label;
  node.kernel = def.name;
  node.scalars = sargs;
  for (std::size_t i = 0; i < def.arrays.size(); ++i) {
    const auto& v = rec_->values_[arg_values[i]];
    const int buffer = v.buffer;
    node.arrays.push_back({def.arrays[i].name, def.arrays[i].access, buffer, v.byte_offset,
                           static_cast<int64_t>(bytes_of(v.shape, v.dtype)), v.shape, v.dtype});
  }
  node.id = static_cast<int>(rec_->nodes_.size());
  for (const NodeArgInfo& a : node.arrays)
    if (reads(a.access)) rec_->check_readable(a.buffer, node_name(node));
  rec_->check_races(node, def.per_sample);
  rec_->add_node(std::move(node), &kernel, impl);

  std::vector<Value> results;
  for (int v : out_values) results.push_back(Value(rec_, v));
  {
    std::size_t in = 0;
    for (const auto& p : def.arrays) {
      if (!reads(p.access)) continue;
      if (writes(p.access)) results.push_back(inputs[in]);
      ++in;
    }
  }
  return results;
}

Value Recorder::call(const Kernel& kernel, const std::vector<Arg>& args,
                     const CallOptions& options) {
  int written = 0;
  for (const auto& p : kernel.def().arrays) written += writes(p.access);
  if (written != 1)
    throw InvalidArgument("kernel " + kernel.name() +
                          ": call() needs exactly one output, the kernel writes " +
                          std::to_string(written) + " arrays; use call_all()");
  return call_all(kernel, args, options).front();
}

int Recording::record_control(NodeKind kind, Value cell,
                              const std::vector<std::function<void()>>& arms) {
  const std::string who = "Recorder::" + std::string(node_kind_name(kind)) + "_";
  const ValueData& c = value(cell, who + ": cell");
  if (c.dtype != DType::u32 || bytes_of(c.shape, c.dtype) != 4)
    throw InvalidArgument(who + ": cell must be a one-cell u32 array (a device condition), got " +
                          std::string(dtype_name(c.dtype)) + shape_str(c.shape));
  if (arms.empty()) throw InvalidArgument(who + ": needs at least one arm");
  check_readable(c.buffer, who);
  for (std::size_t i = 0; i < arms.size(); ++i)
    if (!arms[i]) throw InvalidArgument(who + ": arm " + std::to_string(i) + " is empty");
  NodeInfo node;
  node.kind = kind;
  node.label = std::string(node_kind_name(kind));
  node.kernel = node.label;
  node.arrays = {{"cond", Access::read, c.buffer, c.byte_offset, 4, c.shape, c.dtype}};
  node.bodies.resize(arms.size());
  const int id = add_node(std::move(node), nullptr, KernelImpl{});
  for (std::size_t i = 0; i < arms.size(); ++i) {
    open_.emplace_back(id, static_cast<int>(i));
    arms[i]();
    open_.pop_back();
  }
  return id;
}

void Recorder::if_(Value cell, const std::function<void()>& then_arm,
                   const std::function<void()>& else_arm) {
  check_open(rec_->finished_);
  if (!then_arm) throw InvalidArgument("Recorder::if_: then_arm is empty");
  std::vector<std::function<void()>> arms{then_arm};
  if (else_arm) arms.push_back(else_arm);
  rec_->record_control(NodeKind::if_, cell, arms);
}

void Recorder::switch_(Value cell, const std::vector<std::function<void()>>& arms) {
  check_open(rec_->finished_);
  rec_->record_control(NodeKind::switch_, cell, arms);
}

void Recorder::while_(Value cell, const std::function<void()>& body) {
  check_open(rec_->finished_);
  if (!body) throw InvalidArgument("Recorder::while_: body is empty");
  const int id = rec_->record_control(NodeKind::while_, cell, {body});
  // A loop whose body never writes its cell could never stop once it started.
  const NodeArgInfo& c = rec_->nodes_[id].arrays[0];
  std::vector<NodeArgInfo> inside;
  for (int child : rec_->nodes_[id].bodies[0]) rec_->subtree_accesses(child, inside);
  for (const NodeArgInfo& a : inside)
    if (a.buffer == c.buffer && writes(a.access) &&
        overlaps(a.byte_offset, a.byte_offset + a.bytes, c.byte_offset, c.byte_offset + 4))
      return;
  throw RecordError("Recorder::while_: the body never writes its cell '" +
                    rec_->buffers_[c.buffer].label +
                    "', so the loop could never stop; update the cell inside the body");
}

// The innermost open device construct and arm; fork branches always run, so they do not count.
std::pair<int, int> Recording::innermost_condition() const {
  for (auto it = open_.rbegin(); it != open_.rend(); ++it)
    if (nodes_[it->first].kind != NodeKind::fork) return *it;
  return {-1, -1};
}

// A buffer made inside an arm is readable only while that arm is open.
void Recording::check_readable(int buffer, const std::string& what) const {
  const auto scope = scope_[buffer];
  if (scope.first < 0) return;
  for (const auto& open : open_)
    if (open == scope) return;
  const NodeInfo& c = nodes_[scope.first];
  throw RecordError(what + " reads array '" + buffers_[buffer].label + "', made inside arm " +
                    std::to_string(scope.second) + " of " + node_name(c) +
                    ", after that arm: when the arm does not run it holds nothing. Make the "
                    "array before the construct and write it in place inside (buffer=)");
}

// `y = new` inside a device construct, where y held a value from outside it and `new` was made
// in the open arm: the new value's buffer is merged into the old view, in place, so the name
// keeps one array across the construct (and across a loop's turns).
void Recording::merge_rebound(int old_value, int new_value) {
  if (finished_) return;
  const auto arm = innermost_condition();
  if (arm.first < 0) return;
  const ValueData old_v = values_[old_value];
  const ValueData new_v = values_[new_value];
  if (old_v.buffer == new_v.buffer || scope_[new_v.buffer] != arm || scope_[old_v.buffer] == arm)
    return;  // not a rebinding across the construct's boundary
  const BufferInfo& nb = buffers_[new_v.buffer];
  const std::string what = "rebinding a name held by array '" + buffers_[old_v.buffer].label +
                           "' to '" + nb.label + "' inside arm " + std::to_string(arm.second) +
                           " of " + node_name(nodes_[arm.first]);
  if (nb.kind != BufferKind::internal || new_v.byte_offset != 0 ||
      bytes_of(new_v.shape, new_v.dtype) != nb.bytes || new_v.shape != old_v.shape ||
      new_v.dtype != old_v.dtype)
    throw RecordError(what +
                      ": the new value must be a whole new array of the old one's shape "
                      "and dtype to be merged in place; write the old array with buffer=");
  // Every writer of the new array must be per-sample and reduce nothing: then it may write the
  // old array in place.
  for (const NodeInfo& n : nodes_)
    for (const NodeArgInfo& a : n.arrays)
      if (a.buffer == new_v.buffer && writes(a.access)) {
        const Kernel* k = kernels_[n.id].get();
        if (!k || !k->def().per_sample || k->def().reduces)
          throw RecordError(
              what + ": " + node_name(n) + " (kernel " + n.kernel + ") " +
              (k && k->def().reduces ? "reduces across samples" : "is not per-sample") +
              ", so writing the old array in place would race. Keep the result in "
              "an array made before the construct with buffer= (e.g. ping-pong "
              "two arrays)");
      }
  const int from = new_v.buffer, to = old_v.buffer;
  for (NodeInfo& n : nodes_) {
    bool touched = false;
    for (NodeArgInfo& a : n.arrays)
      if (a.buffer == from) {
        a.buffer = to;
        a.byte_offset += old_v.byte_offset;
        touched = true;
      }
    if (touched && n.kind == NodeKind::kernel) check_races(n, kernels_[n.id]->def().per_sample);
  }
  for (ValueData& v : values_)
    if (v.buffer == from) {
      v.buffer = to;
      v.byte_offset += old_v.byte_offset;
    }
  buffers_[from].merged_into = to;
}

// The item of `list` whose subtree holds node `id`, or -1.
int Recording::item_holding(const std::vector<int>& list, int id) const {
  for (int n = id; n >= 0; n = nodes_[n].parent)
    if (std::find(list.begin(), list.end(), n) != list.end()) return n;
  return -1;
}

void Branch::wait(Value v) {
  Recording& rec = *rec_;
  const auto& d = rec.value(v, "Branch::wait");
  if (rec.finished_ || rec.open_.empty() ||
      rec.nodes_[rec.open_.back().first].kind != NodeKind::fork ||
      rec.open_.back().second != index_)
    throw InvalidArgument("Branch::wait: call it inside its own branch, outside nested constructs");
  const int fork = rec.open_.back().first;
  const int64_t begin = d.byte_offset,
                end = d.byte_offset + static_cast<int64_t>(bytes_of(d.shape, d.dtype));
  // The last node recorded so far that wrote the value.
  int writer = -1;
  for (int n = static_cast<int>(rec.nodes_.size()) - 1; n >= 0 && writer < 0; --n)
    for (const NodeArgInfo& a : rec.nodes_[n].arrays)
      if (!is_control(rec.nodes_[n].kind) && a.buffer == d.buffer && writes(a.access) &&
          overlaps(a.byte_offset, a.byte_offset + a.bytes, begin, end))
        writer = n;
  if (writer < 0)
    throw RecordError("Branch::wait: no earlier node writes array '" +
                      rec.buffers_[d.buffer].label + "'; there is nothing to wait for");
  for (int b = 0; b < index_; ++b) {
    const int item = rec.item_holding(rec.nodes_[fork].bodies[b], writer);
    if (item >= 0) rec.pending_waits_.push_back(item);
  }
  // A writer before the fork or in this branch is already ordered: nothing to add.
}

// Branches run concurrently: two of them touching the same bytes, one writing, must be ordered
// by a wait (a wait edge from an item at or after the first to one at or before the second).
void Recording::check_fork_races(int fork) const {
  const auto& branches = nodes_[fork].bodies;
  // Each item's accesses (its whole subtree), gathered once for all the pairs below.
  std::vector<std::vector<std::vector<NodeArgInfo>>> accesses(branches.size());
  for (std::size_t b = 0; b < branches.size(); ++b)
    for (int item : branches[b]) subtree_accesses(item, accesses[b].emplace_back());
  auto clash = [](const std::vector<NodeArgInfo>& xs,
                  const std::vector<NodeArgInfo>& ys) -> const NodeArgInfo* {
    for (const NodeArgInfo& a : xs)
      for (const NodeArgInfo& b : ys)
        if (a.buffer == b.buffer && (writes(a.access) || writes(b.access)) &&
            overlaps(a.byte_offset, a.byte_offset + a.bytes, b.byte_offset,
                     b.byte_offset + b.bytes))
          return &a;
    return nullptr;
  };
  for (std::size_t j = 0; j < branches.size(); ++j) {
    for (std::size_t i = 0; i < j; ++i) {
      const auto& bi = branches[i];
      const auto& bj = branches[j];
      for (std::size_t x = 0; x < bi.size(); ++x) {
        for (std::size_t y = 0; y < bj.size(); ++y) {
          const NodeArgInfo* shared = clash(accesses[i][x], accesses[j][y]);
          if (!shared) continue;
          bool ordered = false;
          for (std::size_t y2 = 0; y2 <= y && !ordered; ++y2)
            for (int w : nodes_[bj[y2]].waits)
              for (std::size_t x2 = x; x2 < bi.size(); ++x2)
                if (bi[x2] == w) ordered = true;
          if (!ordered)
            throw RecordError("race refused: " + node_name(nodes_[bi[x]]) + " (branch " +
                              std::to_string(i) + ") and " + node_name(nodes_[bj[y]]) +
                              " (branch " + std::to_string(j) + ") both access array '" +
                              buffers_[shared->buffer].label +
                              "' and one writes it, with no order between them; add "
                              "Branch::wait on the array in branch " +
                              std::to_string(j));
        }
      }
    }
  }
}

void Recorder::parallel(const std::vector<std::function<void(Branch&)>>& branches) {
  check_open(rec_->finished_);
  if (branches.empty()) throw InvalidArgument("Recorder::parallel: needs at least one branch");
  for (std::size_t i = 0; i < branches.size(); ++i)
    if (!branches[i])
      throw InvalidArgument("Recorder::parallel: branch " + std::to_string(i) + " is empty");
  NodeInfo node;
  node.kind = NodeKind::fork;
  node.label = "parallel";
  node.kernel = "parallel";
  node.bodies.resize(branches.size());
  const int id = rec_->add_node(std::move(node), nullptr, KernelImpl{});
  for (std::size_t i = 0; i < branches.size(); ++i) {
    rec_->open_.emplace_back(id, static_cast<int>(i));
    rec_->pending_waits_.clear();
    Branch b(rec_, static_cast<int>(i));
    branches[i](b);
    rec_->pending_waits_.clear();  // a wait with nothing after it orders nothing
    rec_->open_.pop_back();
  }
  rec_->check_fork_races(id);
}

void Recorder::for_(int64_t n, const std::function<void()>& body) {
  check_open(rec_->finished_);
  if (n < 0) throw InvalidArgument("Recorder::for_: n must be >= 0, got " + std::to_string(n));
  if (n > static_cast<int64_t>(UINT32_MAX))
    throw InvalidArgument("Recorder::for_: n must fit in a u32 cell");
  if (!body) throw InvalidArgument("Recorder::for_: body is empty");
  Value remaining = empty({1}, DType::u32, "for.remaining");
  Value going = empty({1}, DType::u32, "for.going");
  Value stop = empty({1}, DType::u32, "for.break");
  Value skip = empty({1}, DType::u32, "for.continue");
  call(kernels::fill(), {static_cast<double>(n)}, buffer(remaining));
  call(kernels::fill(), {n > 0 ? 1.0 : 0.0}, buffer(going));
  call(kernels::fill(), {0.0}, buffer(stop));
  while_(going, [&] {
    call(kernels::fill(), {0.0}, buffer(skip));
    rec_->loops_.push_back({stop, skip, rec_->open_.size()});
    body();
    // Close the guards break_if / continue_if opened, then count the turn.
    for (int g = 0; g < rec_->loops_.back().guards; ++g) rec_->open_.pop_back();
    rec_->loops_.pop_back();
    call_all(kernels::loop_next(), {remaining, stop}, buffer(going));
  });
}

// Sets `flag` |= cell, then opens an if_ arm holding the rest of the body: it runs only while
// neither break nor continue has fired this turn.
void Recording::guard_rest_of_loop_body(Value flag, Value cell, const char* who) {
  LoopFrame& loop = loops_.back();
  if (open_.size() != loop.depth + static_cast<std::size_t>(loop.guards))
    throw InvalidArgument(std::string(who) +
                          ": call it directly in the for_ body, not inside a nested construct");
  Recorder r(this);
  r.call(kernels::cell_or(), {flag, cell}, buffer(flag));
  Value keep = r.call(kernels::cell_none(), {loop.stop, loop.skip});
  const ValueData& k = values_[keep.id()];
  NodeInfo guard;
  guard.kind = NodeKind::if_;
  guard.label = std::string(who) + " guard";
  guard.kernel = "if";
  guard.arrays = {{"cond", Access::read, k.buffer, k.byte_offset, 4, k.shape, k.dtype}};
  guard.bodies.resize(1);
  const int id = add_node(std::move(guard), nullptr, KernelImpl{});
  open_.emplace_back(id, 0);
  ++loop.guards;
}

void Recorder::break_if(Value cell) {
  check_open(rec_->finished_);
  if (rec_->loops_.empty()) throw InvalidArgument("Recorder::break_if: only inside a for_ body");
  rec_->guard_rest_of_loop_body(rec_->loops_.back().stop, cell, "Recorder::break_if");
}

void Recorder::continue_if(Value cell) {
  check_open(rec_->finished_);
  if (rec_->loops_.empty()) throw InvalidArgument("Recorder::continue_if: only inside a for_ body");
  rec_->guard_rest_of_loop_body(rec_->loops_.back().skip, cell, "Recorder::continue_if");
}

void Recorder::if_chain(const std::vector<std::pair<Value, std::function<void()>>>& arms,
                        const std::function<void()>& else_arm) {
  check_open(rec_->finished_);
  const int n = static_cast<int>(arms.size());
  if (n < 1 || n > kernels::kMaxFirstTrue)
    throw InvalidArgument("Recorder::if_chain: needs 1 to " +
                          std::to_string(kernels::kMaxFirstTrue) + " conditions, got " +
                          std::to_string(n));
  std::vector<Arg> conds;
  std::vector<std::function<void()>> bodies;
  for (const auto& [cell, arm] : arms) {
    conds.emplace_back(cell);
    bodies.push_back(arm);
  }
  if (else_arm) bodies.push_back(else_arm);
  // One decision at the head: the index of the first true condition (n when none is).
  Value index = call(kernels::first_true(n), conds, CallOptions{{}, "if_chain decision"});
  switch_(index, bodies);
}

void Recorder::result(const std::vector<Value>& values) {
  check_open(rec_->finished_);
  if (rec_->results_set_) throw InvalidArgument("Recorder::result: the result is already set");
  for (std::size_t i = 0; i < values.size(); ++i)
    rec_->value(values[i], "Recorder::result: value " + std::to_string(i));
  for (std::size_t i = 0; i < values.size(); ++i)
    rec_->check_readable(rec_->values_[values[i].id()].buffer,
                         "Recorder::result: value " + std::to_string(i));
  for (const Value& v : values) rec_->result_values_.push_back(v.id());
  rec_->results_set_ = true;
}

}  // namespace eagle
