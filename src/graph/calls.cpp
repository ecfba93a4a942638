// A kernel call becoming a node: arguments checked, outputs resolved, the node appended.
#include "eagle/core/error.hpp"
#include "eagle/core/shape.hpp"
#include "graph/state.hpp"

namespace eagle {

int Recording::State::add_node(NodeInfo node, const Kernel* kernel, KernelImpl impl) {
  node.id = static_cast<int>(nodes.size());
  node.parent = open.empty() ? -1 : open.back().first;
  if (!open.empty() && nodes[static_cast<std::size_t>(open.back().first)].kind == NodeKind::fork) {
    node.waits = std::move(pending_waits);
    pending_waits.clear();
  }
  for (const NodeArgInfo& a : node.arrays) {
    auto& list = nodes_of_buffer[static_cast<std::size_t>(a.buffer)];
    if (list.empty() || list.back() != node.id) list.push_back(node.id);
  }
  current_list().push_back(node.id);
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
  return NodeArgInfo{
      param,   access,  v.buffer, v.byte_offset, view_span_bytes(v.shape, v.strides, v.dtype),
      v.shape, v.dtype, v.strides};
}

std::vector<Value> Recorder::call_all(const Kernel& kernel, const std::vector<Arg>& args,
                                      const CallOptions& options) {
  Recording::State& s = *rec_->s_;
  s.check_open("Recorder::call");
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
  std::vector<std::string> in_names, out_names;
  for (const auto& p : def.arrays) (reads(p.access) ? in_names : out_names).push_back(p.name);
  std::vector<ArrayMeta> metas;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const auto& v = s.value(inputs[i], who + ": array argument '" + in_names[i] + "'");
    metas.push_back({v.shape, v.dtype});
  }
  std::vector<ScalarArg> sargs;
  for (std::size_t i = 0; i < scalars.size(); ++i)
    sargs.push_back(scalars[i].as(def.scalars[i].kind));
  std::vector<ArrayMeta> out_metas = kernel.infer(metas, sargs);
  const std::string label = options.label.empty() ? def.name : options.label;

  // Validate every supplied buffer before anything is added.
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
      if (!a->defined())
        throw InvalidArgument(what + ": buffer= array is undefined (a default-constructed Array)");
      if (!a->is_contiguous()) throw InvalidArgument(what + ": buffer= array must be contiguous");
      if (a->read_only())
        throw InvalidArgument(what + ": buffer= array is read-only; the graph would write it");
      got = {a->shape(), a->dtype()};
    } else {
      const auto& v = s.value(std::get<Value>(options.buffers[o]), what + " buffer=");
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
  const KernelImpl impl = kernel.select(dtypes);  // may decline with NotSupported

  Transaction t(s);
  // Output buffers: a caller's array, an existing value, or a new internal buffer.
  std::vector<int> out_values;
  for (std::size_t o = 0; o < out_metas.size(); ++o) {
    if (o < options.buffers.size()) {
      if (const Array* a = std::get_if<Array>(&options.buffers[o])) {
        int existing = s.external_buffer_for(*a);
        if (existing < 0) {
          s.check_distinct_memory(*a, who + ": output '" + out_names[o] + "' buffer=");
          existing = s.new_buffer(BufferKind::external, a->shape(), a->dtype(),
                                  label + "." + out_names[o]);
          s.arrays[static_cast<std::size_t>(existing)] = *a;
          s.remember_caller_memory(*a, existing);
        }
        out_values.push_back(s.new_value(existing, 0, a->shape(), a->dtype()));
      } else {
        out_values.push_back(std::get<Value>(options.buffers[o]).id());
      }
      continue;
    }
    const int b = s.new_buffer(BufferKind::internal, out_metas[o].shape, out_metas[o].dtype,
                               label + "#" + std::to_string(s.nodes.size()) + "." + out_names[o]);
    out_values.push_back(s.new_value(b, 0, out_metas[o].shape, out_metas[o].dtype));
  }

  // The node's arguments in parameter order.
  NodeInfo node;
  node.kind = NodeKind::kernel;
  node.label = label;
  node.kernel = def.name;
  node.scalars = sargs;
  node.id = static_cast<int>(s.nodes.size());
  {
    std::size_t in = 0, out = 0;
    for (const auto& p : def.arrays) {
      const int value = reads(p.access) ? inputs[in++].id() : out_values[out++];
      node.arrays.push_back(s.arg_info(p.name, p.access, value));
    }
  }
  for (std::size_t i = 0; i < node.arrays.size(); ++i) {
    const NodeArgInfo& a = node.arrays[i];
    const ArrayParam& p = def.arrays[i];
    if (!p.strided && !a.strides.empty())
      throw InvalidArgument(who + ": argument '" + p.name + "' is a strided view " +
                            shape_str(a.strides) +
                            "; the kernel does not declare that it takes strided arrays");
    if (reads(a.access)) s.check_readable(a.buffer, node_name(node));
    // A written param is shadowed (the graph writes its own copy); an external is written as is.
    if (writes(a.access) &&
        s.buffers[static_cast<std::size_t>(a.buffer)].kind == BufferKind::external &&
        s.arrays[static_cast<std::size_t>(a.buffer)].read_only())
      throw InvalidArgument(who + ": argument '" + p.name + "' writes array '" +
                            s.buffers[static_cast<std::size_t>(a.buffer)].label +
                            "', which is read-only");
  }
  s.check_races(node, def.per_sample);
  s.add_node(std::move(node), &kernel, impl);

  std::vector<Value> results;
  for (int v : out_values) results.push_back(s.handle(v));
  {
    std::size_t in = 0;
    for (const auto& p : def.arrays) {
      if (!reads(p.access)) continue;
      if (writes(p.access)) results.push_back(inputs[in]);
      ++in;
    }
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

}  // namespace eagle
