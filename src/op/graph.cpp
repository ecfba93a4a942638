#include "eagle/op/graph.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <set>

#include "eagle/core/error.hpp"
#include "eagle/core/shape.hpp"
#include "op/tables.hpp"
#include "util/json.hpp"

namespace eagle::op {

struct TensorRec {
  int64_t uid = 0;
  bool user_uid = false;
  std::string name;
  DType dtype = DType::f32;
  Dims dims, strides;
  bool is_virtual = false;
  int ragged = -1;    // tensor index of the ragged offset, or -1
  int producer = -1;  // node index, or -1 for a graph input
  std::vector<int> consumers;
};

// Ports by tensor index (a Tensor handle would own the state it lives in: a cycle).
using PortIdx = std::vector<std::pair<std::string, int>>;

struct NodeRec {
  const OpSchema* schema;
  std::string name;
  PortIdx inputs, outputs;
  std::map<std::string, Attr> attrs;  // with defaults applied
};

struct GraphState {
  std::string name;
  std::vector<TensorRec> tensors;
  std::vector<NodeRec> nodes;
  bool frozen = false;
  bool planned = false;
  std::string planned_by;
  std::mutex memo_mutex;
  std::map<const void*, std::shared_ptr<const void>> memo;
};

namespace {

[[noreturn]] void frozen_error(const GraphState& s, const std::string& what) {
  throw InvalidArgument(what + ": graph '" + s.name +
                        "' is frozen (planned); inspect it, or build a new graph to change it");
}

void check_mutable(const GraphState& s, const std::string& what) {
  if (s.frozen) frozen_error(s, what);
}

// One past the largest uid; when a user took INT64_MAX (nothing lies past it), the smallest
// free uid >= 1 instead: there is always one, and max + 1 would overflow.
int64_t fresh_uid(const GraphState& s) {
  int64_t top = 0;
  for (const TensorRec& t : s.tensors) top = std::max(top, t.uid);
  if (top < std::numeric_limits<int64_t>::max()) return std::max<int64_t>(top + 1, 1);
  std::set<int64_t> taken;
  for (const TensorRec& t : s.tensors) taken.insert(t.uid);
  int64_t uid = 1;
  while (taken.count(uid)) ++uid;
  return uid;
}

// Dims and strides an engine can address: no negative entry, and element counts and byte
// offsets (of `dtype`) that fit in int64.
void check_dims(const std::string& what, const Dims& dims, const Dims& strides, DType dtype) {
  for (int64_t d : dims)
    if (d < 0) throw InvalidArgument(what + ": dims " + dims_str(dims) + " must be >= 0");
  if (!strides.empty() && strides.size() != dims.size())
    throw InvalidArgument(what + ": strides " + dims_str(strides) +
                          " must have one entry per dim " + dims_str(dims));
  for (int64_t s : strides)
    if (s < 0) throw InvalidArgument(what + ": strides " + dims_str(strides) + " must be >= 0");
  checked_nbytes(dims, dtype, what);
  if (!strides.empty()) checked_byte_extent(dims, strides, dtype, what);
}

// An op output is written: two of its elements at one address would lose one of them. (Inputs
// may broadcast with stride 0.)
void check_output_strides(const std::string& what, const TensorRec& t, const Dims& strides) {
  if (t.producer >= 0 && may_overlap(t.dims, strides))
    throw InvalidArgument(what + ": strides " + dims_str(strides) + " make elements of dims " +
                          dims_str(t.dims) +
                          " share memory; an op output needs its own address for every element "
                          "(only inputs may broadcast with stride 0)");
}

// Row-major strides; dims of size 0 count as 1. The arithmetic wraps rather than overflows for
// an empty tensor with huge dims (no element is ever addressed through them).
Dims row_major(const Dims& dims) {
  Dims s(dims.size(), 1);
  for (std::size_t i = dims.size(); i-- > 1;)
    s[i - 1] = static_cast<int64_t>(static_cast<uint64_t>(s[i]) *
                                    static_cast<uint64_t>(std::max<int64_t>(dims[i], 1)));
  return s;
}

bool accepts(DTypeClass c, DType t) {
  switch (c) {
    case DTypeClass::floating:
      return is_floating(t);
    case DTypeClass::integer:
      return t == DType::i32 || t == DType::i64 || t == DType::u32 || t == DType::u8;
    case DTypeClass::any:
      return true;
  }
  return false;
}

std::string_view class_name(DTypeClass c) {
  switch (c) {
    case DTypeClass::floating:
      return "a floating dtype";
    case DTypeClass::integer:
      return "an integer dtype";
    case DTypeClass::any:
      return "any dtype";
  }
  return "?";
}

bool produced(const OutputPort& p, const std::map<std::string, Attr>& attrs,
              const std::map<std::string, TensorMeta>& inputs) {
  switch (p.when) {
    case OutputPort::When::always:
      return true;
    case OutputPort::When::attr_true:
      return attrs.at(p.condition).as_bool(p.condition);
    case OutputPort::When::input_wired:
      return inputs.count(p.condition) != 0;
  }
  return false;
}

// Checks attributes against the schema and applies defaults.
std::map<std::string, Attr> resolve_attrs(const OpSchema& s, const Attrs& given) {
  std::map<std::string, Attr> out;
  for (const auto& [name, value] : given) {
    const std::string& wanted = name;  // (a structured binding; clang 14 cannot capture one)
    auto spec = std::find_if(s.attrs.begin(), s.attrs.end(),
                             [&](const AttrSpec& a) { return a.name == wanted; });
    if (spec == s.attrs.end()) {
      std::string known;
      for (const AttrSpec& a : s.attrs) known += (known.empty() ? "" : ", ") + a.name;
      throw InvalidArgument(s.name + ": unknown attribute '" + name +
                            "' (known: " + (known.empty() ? "none" : known) + ")");
    }
    if (out.count(name)) throw InvalidArgument(s.name + ": attribute '" + name + "' given twice");
    const bool fits = value.type() == spec->type ||
                      (spec->type == AttrType::real && value.type() == AttrType::integer) ||
                      (spec->type == AttrType::dtype && value.type() == AttrType::text);
    if (!fits)
      throw InvalidArgument(s.name + ": attribute '" + name + "' must be " +
                            std::string(attr_type_name(spec->type)) + ", got " +
                            std::string(attr_type_name(value.type())));
    if (spec->type == AttrType::dtype) value.as_dtype(s.name + ": attribute " + name);
    // No real attribute of any op means anything at NaN or infinity; the op's shape rule checks
    // its range.
    if (spec->type == AttrType::real && !std::isfinite(value.as_real(name)))
      throw InvalidArgument(s.name + ": attribute '" + name + "' must be a finite number, got " +
                            value.to_json());
    out.emplace(name, value);
  }
  for (const AttrSpec& a : s.attrs) {
    if (out.count(a.name)) continue;
    if (a.required) throw InvalidArgument(s.name + ": attribute '" + a.name + "' is required");
    if (a.default_value) out.emplace(a.name, *a.default_value);
  }
  return out;
}

}  // namespace

// ---- Tensor

namespace {
// The record behind a handle; an undefined (default-constructed or moved-from) handle has none.
TensorRec& tensor_rec(const std::shared_ptr<GraphState>& s, int index, const char* what) {
  if (!s)
    throw InvalidArgument(std::string("op::Tensor::") + what +
                          ": the tensor is undefined (a default-constructed op::Tensor)");
  return s->tensors.at(static_cast<std::size_t>(index));
}
}  // namespace

#define EAGLE_TENSOR_REC(what) (tensor_rec(state_, index_, what))

int64_t Tensor::uid() const {
  return EAGLE_TENSOR_REC("uid").uid;
}
bool Tensor::uid_assigned_by_user() const {
  return EAGLE_TENSOR_REC("uid_assigned_by_user").user_uid;
}
const std::string& Tensor::name() const {
  return EAGLE_TENSOR_REC("name").name;
}
DType Tensor::dtype() const {
  return EAGLE_TENSOR_REC("dtype").dtype;
}
const Dims& Tensor::dims() const {
  return EAGLE_TENSOR_REC("dims").dims;
}
const Dims& Tensor::strides() const {
  return EAGLE_TENSOR_REC("strides").strides;
}
bool Tensor::is_virtual() const {
  return EAGLE_TENSOR_REC("is_virtual").is_virtual;
}
int Tensor::producer() const {
  return EAGLE_TENSOR_REC("producer").producer;
}
Tensor Tensor::ragged_offset() const {
  const int r = EAGLE_TENSOR_REC("ragged_offset").ragged;
  return r < 0 ? Tensor() : Tensor(state_, r);
}

namespace {
std::string tensor_what(const TensorRec& t, const char* setter) {
  return "Tensor::" + std::string(setter) + " on '" + t.name + "'";
}
// A tensor a node already reads has fixed dims and dtype: the node's outputs were inferred
// from them.
void check_unread(const TensorRec& t, const char* setter) {
  if (!t.consumers.empty())
    throw InvalidArgument(tensor_what(t, setter) +
                          ": a node already reads it; set dims and dtype before using it");
}
}  // namespace

Tensor& Tensor::set_uid(int64_t uid) {
  TensorRec& t = EAGLE_TENSOR_REC("set_uid");
  check_mutable(*state_, tensor_what(t, "set_uid"));
  if (uid < 0) throw InvalidArgument(tensor_what(t, "set_uid") + ": uid must be >= 0");
  for (TensorRec& other : state_->tensors) {
    if (&other == &t || other.uid != uid) continue;
    if (other.user_uid)
      throw InvalidArgument(tensor_what(t, "set_uid") + ": uid " + std::to_string(uid) +
                            " already belongs to '" + other.name + "' (set by the user)");
    other.uid = -1;  // an automatic holder gives way and is renumbered
    t.uid = uid;
    other.uid = fresh_uid(*state_);
  }
  t.uid = uid;
  t.user_uid = true;
  return *this;
}
Tensor& Tensor::set_name(const std::string& name) {
  TensorRec& t = EAGLE_TENSOR_REC("set_name");
  check_mutable(*state_, tensor_what(t, "set_name"));
  t.name = name;
  return *this;
}
Tensor& Tensor::set_dtype(DType dtype) {
  TensorRec& t = EAGLE_TENSOR_REC("set_dtype");
  check_mutable(*state_, tensor_what(t, "set_dtype"));
  check_unread(t, "set_dtype");
  if (t.producer >= 0 && is_floating(t.dtype) != is_floating(dtype))
    throw InvalidArgument(tensor_what(t, "set_dtype") + ": an op output stays " +
                          (is_floating(t.dtype) ? "floating" : "non-floating"));
  check_dims(tensor_what(t, "set_dtype"), t.dims, t.strides, dtype);  // wider items, more bytes
  t.dtype = dtype;
  return *this;
}
Tensor& Tensor::set_dims(const Dims& dims) {
  TensorRec& t = EAGLE_TENSOR_REC("set_dims");
  check_mutable(*state_, tensor_what(t, "set_dims"));
  check_unread(t, "set_dims");
  check_dims(tensor_what(t, "set_dims"), dims, {}, t.dtype);
  if (t.producer >= 0 && dims != t.dims)
    throw InvalidArgument(tensor_what(t, "set_dims") + ": " + dims_str(dims) +
                          " differs from the inferred " + dims_str(t.dims));
  t.dims = dims;
  t.strides = row_major(dims);
  return *this;
}
Tensor& Tensor::set_strides(const Dims& strides) {
  TensorRec& t = EAGLE_TENSOR_REC("set_strides");
  check_mutable(*state_, tensor_what(t, "set_strides"));
  check_dims(tensor_what(t, "set_strides"), t.dims, strides, t.dtype);
  check_output_strides(tensor_what(t, "set_strides"), t, strides);
  t.strides = strides.empty() ? row_major(t.dims) : strides;
  return *this;
}
Tensor& Tensor::set_output(bool is_output) {
  TensorRec& t = EAGLE_TENSOR_REC("set_output");
  check_mutable(*state_, tensor_what(t, "set_output"));
  if (t.producer < 0)
    throw InvalidArgument(tensor_what(t, "set_output") + ": a graph input is never virtual");
  t.is_virtual = !is_output;
  return *this;
}
Tensor& Tensor::set_ragged_offset(const Tensor& offsets) {
  TensorRec& t = EAGLE_TENSOR_REC("set_ragged_offset");
  check_mutable(*state_, tensor_what(t, "set_ragged_offset"));
  if (!offsets.defined())
    throw InvalidArgument(tensor_what(t, "set_ragged_offset") +
                          ": offsets is undefined (a default-constructed op::Tensor)");
  if (offsets.state_ != state_)
    throw InvalidArgument(tensor_what(t, "set_ragged_offset") +
                          ": offsets belong to another graph");
  const TensorRec& o = state_->tensors[offsets.index_];
  if (o.producer >= 0 || o.dims.size() != 1 || !accepts(DTypeClass::integer, o.dtype))
    throw InvalidArgument(tensor_what(t, "set_ragged_offset") + ": offsets '" + o.name +
                          "' must be a graph input of integers [B+1]");
  t.ragged = offsets.index_;
  return *this;
}

// ---- Node

namespace {
const NodeRec& node_rec(const std::shared_ptr<GraphState>& s, int index) {
  if (!s) throw InvalidArgument("op::Node: the node is undefined (a moved-from op::Node)");
  return s->nodes.at(static_cast<std::size_t>(index));
}
}  // namespace

#define EAGLE_NODE_REC() (node_rec(state_, index_))

const OpSchema& Node::schema() const {
  return *EAGLE_NODE_REC().schema;
}
const std::string& Node::name() const {
  return EAGLE_NODE_REC().name;
}
namespace {
Ports handles(const std::shared_ptr<GraphState>& s, const PortIdx& ports) {
  Ports out;
  for (const auto& [port, idx] : ports) out.emplace_back(port, Graph::tensor_handle(s, idx));
  return out;
}
}  // namespace
Ports Node::inputs() const {
  return handles(state_, EAGLE_NODE_REC().inputs);
}
Ports Node::outputs() const {
  return handles(state_, EAGLE_NODE_REC().outputs);
}
Tensor Node::input(const std::string& port) const {
  for (const auto& [p, idx] : EAGLE_NODE_REC().inputs)
    if (p == port) return Tensor(state_, idx);
  return Tensor();
}
Tensor Node::output(const std::string& port) const {
  for (const auto& [p, idx] : EAGLE_NODE_REC().outputs)
    if (p == port) return Tensor(state_, idx);
  return Tensor();
}
const std::map<std::string, Attr>& Node::attrs() const {
  return EAGLE_NODE_REC().attrs;
}
bool Node::has_attr(const std::string& name) const {
  return EAGLE_NODE_REC().attrs.count(name) != 0;
}
bool Node::flag(const std::string& name) const {
  return has_attr(name) && attr(name).as_bool(name);
}
const Attr& Node::attr(const std::string& name) const {
  const auto& a = EAGLE_NODE_REC().attrs;
  auto it = a.find(name);
  if (it == a.end())
    throw InvalidArgument("Node '" + EAGLE_NODE_REC().name + "': attribute '" + name +
                          "' is not set and has no default");
  return it->second;
}

// ---- Graph

Graph::Graph(std::string name) : state_(std::make_shared<GraphState>()) {
  state_->name = std::move(name);
}
const std::string& Graph::name() const {
  return state_->name;
}
Tensor Graph::tensor_handle(const std::shared_ptr<GraphState>& s, int index) {
  return Tensor(s, index);
}

Tensor Graph::tensor(const TensorSpec& spec) {
  const std::string what = "Graph::tensor '" + spec.name + "'";
  check_mutable(*state_, what);
  check_dims(what, spec.dims, spec.strides, spec.dtype);
  TensorRec t;
  t.name = spec.name;
  if (t.name.empty()) {
    t.name = "t";
    t.name += std::to_string(state_->tensors.size());  // (not "t" + ...: g++ 12 warns falsely)
  }
  t.dtype = spec.dtype;
  t.dims = spec.dims;
  t.strides = spec.strides.empty() ? row_major(spec.dims) : spec.strides;
  t.uid = fresh_uid(*state_);
  state_->tensors.push_back(t);
  Tensor handle(state_, static_cast<int>(state_->tensors.size() - 1));
  if (spec.uid) {
    try {
      handle.set_uid(*spec.uid);
    } catch (...) {
      state_->tensors.pop_back();
      throw;
    }
  }
  return handle;
}

namespace {

// Wires and checks a node's inputs against the schema, returning port -> (tensor, meta).
std::map<std::string, TensorMeta> wire_inputs(const GraphState& s, const OpSchema& schema,
                                              const PortIdx& wired) {
  std::map<std::string, TensorMeta> metas;
  for (const auto& [port, idx] : wired) {
    const std::string& wanted = port;  // (a structured binding; clang 14 cannot capture one)
    auto spec = std::find_if(schema.inputs.begin(), schema.inputs.end(),
                             [&](const InputPort& p) { return p.name == wanted; });
    if (spec == schema.inputs.end()) {
      std::string known;
      for (const InputPort& p : schema.inputs) known += (known.empty() ? "" : ", ") + p.name;
      throw InvalidArgument(schema.name + ": unknown input port '" + port + "' (ports: " + known +
                            ")");
    }
    if (metas.count(port))
      throw InvalidArgument(schema.name + ": input '" + port + "' given twice");
    const TensorRec& t = s.tensors[idx];
    if (!accepts(spec->dtypes, t.dtype))
      throw InvalidArgument(schema.name + ": input '" + port + "' ('" + t.name + "') is " +
                            std::string(dtype_name(t.dtype)) + "; it must be " +
                            std::string(class_name(spec->dtypes)));
    metas[port] = {t.dims, t.dtype};
  }
  for (const InputPort& p : schema.inputs)
    if (p.required && !metas.count(p.name))
      throw InvalidArgument(schema.name + ": input '" + p.name + "' is required");
  return metas;
}

// Runs the schema's shape rule; returns the outputs the node produces, in schema order.
std::vector<std::pair<std::string, TensorMeta>> infer_outputs(
    const OpSchema& schema, const std::map<std::string, TensorMeta>& inputs,
    const std::map<std::string, Attr>& attrs) {
  InferContext ctx{schema.name, inputs, attrs, {}};
  schema.infer(ctx);
  std::vector<std::pair<std::string, TensorMeta>> out;
  for (const OutputPort& p : schema.outputs) {
    if (!produced(p, attrs, inputs)) continue;
    auto it = ctx.outputs.find(p.name);
    if (it == ctx.outputs.end())
      throw std::logic_error(schema.name + ": shape rule did not infer output " + p.name);
    out.emplace_back(p.name, it->second);
  }
  return out;
}

}  // namespace

std::map<std::string, Tensor> Graph::op(const std::string& op, const Ports& inputs,
                                        const Attrs& attrs, const std::string& name) {
  check_mutable(*state_, "Graph::op '" + op + "'");
  const OpSchema* schema = find_op(op);
  if (!schema)
    throw InvalidArgument("Graph::op: unknown op '" + op + "' (see eagle::op::all_ops())");
  PortIdx wired;
  for (const auto& [port, t] : inputs) {
    if (!t.defined()) throw InvalidArgument(op + ": input '" + port + "' is an undefined Tensor");
    if (t.state_ != state_)
      throw InvalidArgument(op + ": input '" + port + "' belongs to another graph");
    wired.emplace_back(port, t.index_);
  }
  // Schema order, so inspection and operand layouts do not depend on the caller's order.
  const auto metas = wire_inputs(*state_, *schema, wired);
  const auto resolved = resolve_attrs(*schema, attrs);
  const auto outs = infer_outputs(*schema, metas, resolved);
  // An output's element count may overflow although every input's fits (embedding appends a
  // dim, matmul multiplies batch dims with M and N).
  for (const auto& [port, meta] : outs)
    check_dims(op + ": output '" + port + "'", meta.dims, {}, meta.dtype);
  // Nothing above changed the graph; from here on nothing throws.
  NodeRec node;
  node.schema = schema;
  node.name = name.empty() ? op + "_" + std::to_string(state_->nodes.size()) : name;
  for (const InputPort& p : schema->inputs)
    for (const auto& w : wired)
      if (w.first == p.name) node.inputs.push_back(w);
  node.attrs = resolved;
  const int node_index = static_cast<int>(state_->nodes.size());
  std::map<std::string, Tensor> result;
  for (const auto& [port, meta] : outs) {
    TensorRec t;
    t.name = node.name + "." + port;
    t.dtype = meta.dtype;
    t.dims = meta.dims;
    t.strides = row_major(meta.dims);
    t.is_virtual = true;
    t.producer = node_index;
    t.uid = fresh_uid(*state_);
    state_->tensors.push_back(t);
    const int idx = static_cast<int>(state_->tensors.size() - 1);
    node.outputs.emplace_back(port, idx);
    result.emplace(port, Tensor(state_, idx));
  }
  for (const auto& w : node.inputs) state_->tensors[w.second].consumers.push_back(node_index);
  state_->nodes.push_back(std::move(node));
  return result;
}

Tensor Graph::pointwise(const std::string& op, const Tensor& a, const Attrs& attrs) {
  return this->op(op, {{"a", a}}, attrs).at("out");
}
Tensor Graph::pointwise(const std::string& op, const Tensor& a, const Tensor& b,
                        const Attrs& attrs) {
  return this->op(op, {{"a", a}, {"b", b}}, attrs).at("out");
}
Tensor Graph::where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  return op("where", {{"cond", cond}, {"a", a}, {"b", b}}).at("out");
}
Tensor Graph::matmul(const Tensor& a, const Tensor& b, const Tensor& bias) {
  Ports p = {{"a", a}, {"b", b}};
  if (bias.defined()) p.emplace_back("bias", bias);
  return op("matmul", p).at("c");
}

void Graph::validate() const {
  const GraphState& s = *state_;
  if (s.nodes.empty())
    throw InvalidArgument("Graph::validate: graph '" + s.name + "' has no nodes");
  std::set<int64_t> uids;
  for (const TensorRec& t : s.tensors) {
    if (!uids.insert(t.uid).second)
      throw InvalidArgument("Graph::validate: uid " + std::to_string(t.uid) + " is used twice");
    const std::string what = "Graph::validate: tensor '" + t.name + "'";
    check_dims(what, t.dims, t.strides, t.dtype);
    check_output_strides(what, t, t.strides);
    if (t.ragged >= 0) {
      const TensorRec& o = s.tensors[t.ragged];
      if (o.dims.size() != 1 || o.dims[0] < 1 || !accepts(DTypeClass::integer, o.dtype))
        throw InvalidArgument("Graph::validate: ragged offset '" + o.name + "' of '" + t.name +
                              "' must be integers [B+1]");
    }
  }
  // An input no node reads would still be an operand the caller must fill, for nothing: most
  // likely a wiring mistake. Ragged offsets are read through the tensors they place.
  std::vector<bool> is_offset(s.tensors.size(), false);
  for (const TensorRec& t : s.tensors)
    if (t.ragged >= 0) is_offset[static_cast<std::size_t>(t.ragged)] = true;
  for (std::size_t i = 0; i < s.tensors.size(); ++i) {
    const TensorRec& t = s.tensors[i];
    if (t.producer < 0 && t.consumers.empty() && !is_offset[i])
      throw InvalidArgument("Graph::validate: input '" + t.name + "' (uid " +
                            std::to_string(t.uid) +
                            ") is read by no node; it would be an operand the caller fills for "
                            "nothing: wire it to a node or leave it out of the graph");
  }
  for (const NodeRec& n : s.nodes) {
    const auto metas = wire_inputs(s, *n.schema, n.inputs);
    const auto outs = infer_outputs(*n.schema, metas, n.attrs);
    for (std::size_t i = 0; i < outs.size(); ++i) {
      const TensorRec& t = s.tensors[n.outputs.at(i).second];
      if (t.dims != outs[i].second.dims)
        throw InvalidArgument("Graph::validate: node '" + n.name + "' output '" + outs[i].first +
                              "' has dims " + dims_str(t.dims) + " but the op yields " +
                              dims_str(outs[i].second.dims));
    }
  }
}

Graph Graph::clone() const {
  Graph g(state_->name);
  g.state_->tensors = state_->tensors;
  g.state_->nodes = state_->nodes;
  return g;
}

void Graph::freeze() {
  state_->frozen = true;
}
bool Graph::frozen() const {
  return state_->frozen;
}
void Graph::claim_for_planning(const std::string& who) {
  if (state_->planned)
    throw InvalidArgument(who + ": graph '" + state_->name + "' was already planned (by " +
                          state_->planned_by +
                          "); planning is one-shot: use select_plan, or plan a new graph");
  state_->planned = true;
  state_->planned_by = who;
}

std::vector<Tensor> Graph::tensors() const {
  std::vector<Tensor> out;
  for (std::size_t i = 0; i < state_->tensors.size(); ++i)
    out.push_back(Tensor(state_, static_cast<int>(i)));
  return out;
}
std::vector<Node> Graph::nodes() const {
  std::vector<Node> out;
  for (std::size_t i = 0; i < state_->nodes.size(); ++i)
    out.push_back(Node(state_, static_cast<int>(i)));
  return out;
}
Tensor Graph::tensor_by_uid(int64_t uid) const {
  for (std::size_t i = 0; i < state_->tensors.size(); ++i)
    if (state_->tensors[i].uid == uid) return Tensor(state_, static_cast<int>(i));
  throw InvalidArgument("Graph '" + state_->name + "': no tensor has uid " + std::to_string(uid));
}

std::vector<Tensor> Graph::operand_tensors() const {
  std::set<int> picked;
  for (std::size_t i = 0; i < state_->tensors.size(); ++i) {
    const TensorRec& t = state_->tensors[i];
    if (!t.is_virtual) picked.insert(static_cast<int>(i));
    if (t.ragged >= 0) picked.insert(t.ragged);
  }
  std::vector<Tensor> out;
  for (int i : picked) out.push_back(Tensor(state_, i));
  std::sort(out.begin(), out.end(),
            [](const Tensor& a, const Tensor& b) { return a.uid() < b.uid(); });
  return out;
}

std::string Graph::to_json() const {
  const GraphState& s = *state_;
  auto dims_json = [](const Dims& d) { return dims_str(d); };
  std::string out = "{\"name\":" + eagle::detail::json_quote(s.name) + ",\"frozen\":";
  out += s.frozen ? "true" : "false";
  out += ",\"tensors\":[";
  for (std::size_t i = 0; i < s.tensors.size(); ++i) {
    const TensorRec& t = s.tensors[i];
    if (i) out += ",";
    out += "{\"uid\":" + std::to_string(t.uid) + ",\"name\":" + eagle::detail::json_quote(t.name) +
           ",\"dtype\":" + eagle::detail::json_quote(dtype_name(t.dtype)) +
           ",\"dims\":" + dims_json(t.dims) + ",\"strides\":" + dims_json(t.strides) +
           ",\"virtual\":";
    out += t.is_virtual ? "true" : "false";
    if (t.ragged >= 0) out += ",\"ragged_offset\":" + std::to_string(s.tensors[t.ragged].uid);
    out += "}";
  }
  out += "],\"nodes\":[";
  auto ports_json = [&](const PortIdx& ports) {
    std::string p = "{";
    for (const auto& [port, idx] : ports) {
      if (p.size() > 1) p += ",";
      p += eagle::detail::json_quote(port) + ":" + std::to_string(s.tensors[idx].uid);
    }
    return p + "}";
  };
  for (std::size_t i = 0; i < s.nodes.size(); ++i) {
    const NodeRec& n = s.nodes[i];
    if (i) out += ",";
    out += "{\"name\":" + eagle::detail::json_quote(n.name) +
           ",\"op\":" + eagle::detail::json_quote(n.schema->name) +
           ",\"inputs\":" + ports_json(n.inputs) + ",\"outputs\":" + ports_json(n.outputs) +
           ",\"attrs\":{";
    bool first = true;
    for (const auto& [k, v] : n.attrs) {
      if (!first) out += ",";
      first = false;
      out += eagle::detail::json_quote(k) + ":" + v.to_json();
    }
    out += "}}";
  }
  return out + "]}";
}

std::shared_ptr<const void> Graph::memo(
    const void* key, const std::function<std::shared_ptr<const void>()>& make) const {
  if (!state_->frozen)
    throw InvalidArgument("Graph::memo: graph '" + state_->name +
                          "' is not frozen; facts are computed only for a frozen graph");
  std::lock_guard<std::mutex> lock(state_->memo_mutex);
  auto it = state_->memo.find(key);
  if (it != state_->memo.end()) return it->second;
  auto value = make();
  state_->memo.emplace(key, value);
  return value;
}

}  // namespace eagle::op
