// A kernel call becoming a node: arguments checked, outputs resolved, the node appended.
#include "eagle/core/error.hpp"
#include "eagle/core/shape.hpp"
#include "graph/state.hpp"

namespace eagle {

int Recording::State::add_node(NodeInfo node, const Kernel* kernel, KernelImpl impl) {
  for (const NodeArgInfo& a : node.arrays)
    if (writes(a.access) && buffers[static_cast<std::size_t>(a.buffer)].constant)
      throw InvalidArgument(node.label + ": parameter '" + a.param + "' would write '" +
                            buffers[static_cast<std::size_t>(a.buffer)].label +
                            "', a Recorder::constant, which is read only (it may be shared); "
                            "write into an array of your own (Recorder::empty) instead");
  node.id = static_cast<int>(nodes.size());
  node.parent = open.empty() ? -1 : open.back().first;
  for (const std::string& name : scopes) node.scope += (node.scope.empty() ? "" : "/") + name;
  if (!open.empty() && nodes[static_cast<std::size_t>(open.back().first)].kind == NodeKind::fork) {
    node.waits = std::move(pending_waits);
    pending_waits.clear();
  }
  for (const NodeArgInfo& a : node.arrays) {
    auto& list = nodes_of_buffer[static_cast<std::size_t>(a.buffer)];
    if (list.empty() || list.back() != node.id) list.push_back(node.id);
  }
  current_list().push_back(node.id);
  snapshots.emplace_back(node.arrays.size());
  nodes.push_back(std::move(node));
  kernels.push_back(kernel ? std::make_unique<Kernel>(*kernel) : nullptr);
  impls.push_back(impl);
  return static_cast<int>(nodes.size()) - 1;
}

std::vector<int>& Recording::State::current_list() {
  if (open.empty()) return top;
  return nodes[static_cast<std::size_t>(open.back().first)]
      .bodies[static_cast<std::size_t>(open.back().second)];
}

NodeArgInfo Recording::State::arg_info(const std::string& param, Access access, int value) const {
  const ValueData& v = values[static_cast<std::size_t>(value)];
  return view_arg_info(param, access, v.buffer, v.byte_offset, v.shape, v.dtype, v.strides);
}

namespace {

// A call's arguments, sorted into arrays and scalars and checked against the kernel's counts.
struct CallArgs {
  std::vector<Value> inputs;
  std::vector<Scalar> scalars;
  std::vector<std::string> in_names, out_names;
};

CallArgs split_args(const Kernel& kernel, const std::vector<Arg>& args, const CallOptions& options,
                    const std::string& who) {
  const KernelDef& def = kernel.def();
  CallArgs c;
  for (const Arg& a : args) {
    if (const Value* v = std::get_if<Value>(&a.get())) {
      c.inputs.push_back(*v);
    } else {
      c.scalars.push_back(std::get<Scalar>(a.get()));
    }
  }
  if (static_cast<int>(c.inputs.size()) != kernel.num_inputs())
    throw InvalidArgument(who + ": expects " + std::to_string(kernel.num_inputs()) +
                          " array arguments, got " + std::to_string(c.inputs.size()));
  if (c.scalars.size() != def.scalars.size())
    throw InvalidArgument(who + ": expects " + std::to_string(def.scalars.size()) +
                          " scalar arguments, got " + std::to_string(c.scalars.size()));
  if (options.buffers.size() > static_cast<std::size_t>(kernel.num_outputs()))
    throw InvalidArgument(who + ": " + std::to_string(options.buffers.size()) +
                          " buffers given but the kernel has " +
                          std::to_string(kernel.num_outputs()) + " outputs");
  for (const auto& p : def.arrays) (reads(p.access) ? c.in_names : c.out_names).push_back(p.name);
  return c;
}

}  // namespace

// The shape and dtype of a supplied output buffer, checked against what the kernel infers
// (nothing is added here).
ArrayMeta Recording::State::supplied_meta(const BufferArg& b, const ArrayMeta& want,
                                          const std::string& what) const {
  ArrayMeta got;
  if (const Array* a = std::get_if<Array>(&b)) {
    if (!a->defined())
      throw InvalidArgument(what + ": buffer= array is undefined (a default-constructed Array)");
    if (!a->is_contiguous()) throw InvalidArgument(what + ": buffer= array must be contiguous");
    if (a->read_only())
      throw InvalidArgument(what + ": buffer= array is read-only; the graph would write it");
    got = {a->shape(), a->dtype()};
  } else {
    const auto& v = value(std::get<Value>(b), what + " buffer=");
    got = {v.shape, v.dtype};
  }
  if (want.shape != Shape{-1} && (got.shape != want.shape || got.dtype != want.dtype))
    throw InvalidArgument(what + " must be " + std::string(dtype_name(want.dtype)) +
                          shape_str(want.shape) + " but buffer= is " +
                          std::string(dtype_name(got.dtype)) + shape_str(got.shape));
  return got;
}

// The value an output is written to: a caller's array (an external buffer, reused when the same
// array was passed before), an existing value, or a new internal buffer.
int Recording::State::output_value(const BufferArg* supplied, const ArrayMeta& meta,
                                   const std::string& label, const std::string& what,
                                   const std::string& who) {
  if (!supplied) {
    const int b = new_buffer(BufferKind::internal, meta.shape, meta.dtype,
                             label + "#" + std::to_string(nodes.size()) + "." + what);
    return new_value(b, 0, meta.shape, meta.dtype);
  }
  if (const Value* v = std::get_if<Value>(supplied)) return v->id();
  const Array& a = std::get<Array>(*supplied);
  int existing = external_buffer_for(a);
  if (existing < 0) {
    check_distinct_memory(a, who + ": output '" + what + "' buffer=");
    existing = new_buffer(BufferKind::external, a.shape(), a.dtype(), label + "." + what);
    arrays[static_cast<std::size_t>(existing)] = a;
    remember_caller_memory(a, existing);
  }
  return new_value(existing, 0, a.shape(), a.dtype());
}

// What a node's arguments must be before it is added: views only where the kernel takes
// strides, reads only of readable arrays, no writes into a caller's read-only array, no races.
void Recording::State::check_node_args(const NodeInfo& node, const KernelDef& def) const {
  for (std::size_t i = 0; i < node.arrays.size(); ++i) {
    const NodeArgInfo& a = node.arrays[i];
    const ArrayParam& p = def.arrays[i];
    if (!p.strided && !a.strides.empty())
      throw InvalidArgument("kernel " + def.name + ": argument '" + p.name +
                            "' is a strided view " + shape_str(a.strides) +
                            "; the kernel does not declare that it takes strided arrays");
    if (reads(a.access)) check_readable(a.buffer, node_name(node));
    if (writes(a.access))
      for (std::size_t d = 0; d < a.strides.size(); ++d)
        if (a.strides[d] == 0 && a.shape[d] > 1)
          throw InvalidArgument("kernel " + def.name + ": argument '" + p.name +
                                "' is written, and it is a broadcast view (stride 0 on dim " +
                                std::to_string(d) + "): its elements share memory");
    // A written param is shadowed (the graph writes its own copy); an external is written as is.
    const BufferInfo& b = buffers[static_cast<std::size_t>(a.buffer)];
    if (writes(a.access) && b.kind == BufferKind::external &&
        arrays[static_cast<std::size_t>(a.buffer)].read_only())
      throw InvalidArgument("kernel " + def.name + ": argument '" + p.name + "' writes array '" +
                            b.label + "', which is read-only");
  }
  check_races(node, def.per_sample);
}

namespace {

// What a call needs before it becomes a node: its arguments sorted, the scalars, the outputs'
// shapes and dtypes (supplied buffers checked against them) and the kernel's implementation for
// these dtypes (which may decline with NotSupported).
struct PreparedCall {
  CallArgs args;
  std::vector<ScalarArg> scalars;
  std::vector<ArrayMeta> outputs;
  KernelImpl impl;
};

PreparedCall prepare_call(const Recording::State& s, const Kernel& kernel,
                          const std::vector<Arg>& args, const CallOptions& options,
                          const std::string& who) {
  const KernelDef& def = kernel.def();
  PreparedCall p{split_args(kernel, args, options, who), {}, {}, {}};
  const CallArgs& c = p.args;
  std::vector<ArrayMeta> metas;
  for (std::size_t i = 0; i < c.inputs.size(); ++i) {
    const auto& v = s.value(c.inputs[i], who + ": array argument '" + c.in_names[i] + "'");
    metas.push_back({v.shape, v.dtype});
  }
  for (std::size_t i = 0; i < c.scalars.size(); ++i)
    p.scalars.push_back(c.scalars[i].as(def.scalars[i].kind));
  p.outputs = kernel.infer(metas, p.scalars);
  // Every supplied buffer is checked before anything is added.
  for (std::size_t o = 0; o < p.outputs.size(); ++o) {
    const std::string what = who + ": output '" + c.out_names[o] + "'";
    if (o < options.buffers.size()) {
      p.outputs[o] = s.supplied_meta(options.buffers[o], p.outputs[o], what);
    } else if (p.outputs[o].shape == Shape{-1}) {
      throw InvalidArgument(what +
                            " has no shape determined by the inputs; supply it with buffer=");
    }
  }
  std::vector<DType> dtypes;
  {
    std::size_t in = 0, out = 0;
    for (const auto& q : def.arrays)
      dtypes.push_back(reads(q.access) ? metas[in++].dtype : p.outputs[out++].dtype);
  }
  p.impl = kernel.select(dtypes);  // may decline with NotSupported
  return p;
}

}  // namespace

std::vector<Value> Recorder::call_all(const Kernel& kernel, const std::vector<Arg>& args,
                                      const CallOptions& options) {
  Recording::State& s = *rec_->s_;
  s.check_open("Recorder::call");
  const KernelDef& def = kernel.def();
  const std::string who = "kernel " + def.name;
  const PreparedCall prepared = prepare_call(s, kernel, args, options, who);
  const CallArgs& c = prepared.args;
  const std::vector<ScalarArg>& sargs = prepared.scalars;
  const std::vector<ArrayMeta>& out_metas = prepared.outputs;
  const KernelImpl impl = prepared.impl;
  if (!s.deferred.empty()) {  // the deferred calls this one depends on are recorded first
    std::vector<int> read_ids, write_ids;
    std::size_t in = 0;
    for (const auto& p : def.arrays)
      if (reads(p.access)) (writes(p.access) ? write_ids : read_ids).push_back(c.inputs[in++].id());
    for (const BufferArg& b : options.buffers)
      if (const Value* v = std::get_if<Value>(&b)) write_ids.push_back(v->id());
    s.flush_deferred_before(read_ids, write_ids);
  }

  Transaction t(s);
  const std::string label = options.label.empty() ? def.name : options.label;
  std::vector<int> out_values;
  for (std::size_t o = 0; o < out_metas.size(); ++o)
    out_values.push_back(s.output_value(o < options.buffers.size() ? &options.buffers[o] : nullptr,
                                        out_metas[o], label, c.out_names[o], who));
  NodeInfo node;
  node.kind = NodeKind::kernel;
  node.label = label;
  node.kernel = def.name;
  node.scalars = sargs;
  node.id = static_cast<int>(s.nodes.size());
  std::vector<Value> results;
  {
    std::size_t in = 0, out = 0;
    for (const auto& p : def.arrays)
      node.arrays.push_back(
          s.arg_info(p.name, p.access, reads(p.access) ? c.inputs[in++].id() : out_values[out++]));
  }
  s.check_node_args(node, def);
  const std::vector<Snapshot> own = s.save_overwritten(node, kernel);
  const int id = s.add_node(std::move(node), &kernel, impl);
  for (std::size_t slot = 0; slot < own.size(); ++slot)
    if (own[slot].state != Snapshot::State::intact)
      s.snapshots[static_cast<std::size_t>(id)][slot] = own[slot];
  s.tape_outputs(id);
  // The write-only outputs, then each read-write argument (updated in place).
  for (int v : out_values) results.push_back(s.handle(v));
  std::size_t in = 0;
  for (const auto& p : def.arrays) {
    if (!reads(p.access)) continue;
    if (writes(p.access)) results.push_back(c.inputs[in]);
    ++in;
  }
  t.commit();
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

std::vector<Value> Recorder::call_deferred(const Kernel& kernel, const std::vector<Arg>& args,
                                           std::shared_ptr<const DeferredTag> tag) {
  Recording::State& s = *rec_->s_;
  s.check_open("Recorder::call_deferred");
  const std::string who = "kernel " + kernel.def().name;
  const PreparedCall prepared = prepare_call(s, kernel, args, {}, who);
  Transaction t(s);
  DeferredCall d{kernel, args, {}, s.scopes, std::move(tag)};
  std::vector<Value> results;
  for (std::size_t o = 0; o < prepared.outputs.size(); ++o) {
    results.push_back(s.handle(s.output_value(nullptr, prepared.outputs[o], kernel.def().name,
                                              prepared.args.out_names[o], who)));
    d.options.buffers.emplace_back(results.back());
  }
  s.deferred.push_back(std::move(d));
  t.commit();
  return results;
}

}  // namespace eagle
