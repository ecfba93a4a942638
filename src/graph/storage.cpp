// Buffers: params, externals and graph-owned arrays; caller memory kept distinct.
#include "eagle/core/error.hpp"
#include "eagle/core/shape.hpp"
#include "graph/state.hpp"

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

int Recording::State::new_buffer(BufferKind kind, const Shape& shape, DType dtype,
                                 std::string label) {
  const int id = static_cast<int>(buffers.size());
  const std::size_t bytes = checked_nbytes(shape, dtype, "array '" + label + "'");
  buffers.push_back(BufferInfo{id, std::move(label), kind, shape, dtype, bytes, -1, -1});
  arrays.emplace_back();
  labeled.push_back(false);
  scope.push_back(innermost_condition());
  nodes_of_buffer.emplace_back();
  values_of_buffer.emplace_back();
  return id;
}

namespace {

int device_code(Device d) {
  return d.is_cpu() ? -1 : d.ordinal();
}

}  // namespace

// Refuses a caller's array that overlaps another one the recording already holds: the graph
// could not order accesses made through two different names for the same memory. The caller
// arrays held are disjoint, so one neighbour lookup decides.
void Recording::State::check_distinct_memory(const Array& a, const std::string& what) const {
  if (a.nbytes() == 0) return;
  const auto [lo, hi] = a.byte_span();
  const int dev = device_code(a.device());
  auto it = caller_memory.lower_bound({dev, hi});
  if (it == caller_memory.begin()) return;
  --it;
  if (it->first.first != dev || it->second.hi <= lo) return;
  const BufferInfo& b = buffers[static_cast<std::size_t>(it->second.buffer)];
  throw RecordError(what + " overlaps the memory of " + std::string(buffer_kind_name(b.kind)) +
                    " array '" + b.label +
                    "'; pass one array and take views of it (Value::slice) instead");
}

void Recording::State::remember_caller_memory(const Array& a, int buffer) {
  if (a.nbytes() == 0) return;
  const auto [lo, hi] = a.byte_span();
  caller_memory[{device_code(a.device()), lo}] = CallerSpan{hi, buffer};
  if (buffers[static_cast<std::size_t>(buffer)].kind == BufferKind::external)
    externals_by_data[a.data()].push_back(buffer);
}

int Recording::State::external_buffer_for(const Array& a) const {
  auto it = externals_by_data.find(a.data());
  if (it == externals_by_data.end()) return -1;
  for (int b : it->second) {
    const Array& held = arrays[static_cast<std::size_t>(b)];
    if (held.shape() == a.shape() && held.dtype() == a.dtype() && held.device() == a.device())
      return b;
  }
  return -1;
}

Value Recorder::param(const std::string& name, const Array& initial) {
  Recording::State& s = *rec_->s_;
  s.check_open("Recorder::param");
  if (name.empty()) throw InvalidArgument("Recorder::param: name must not be empty");
  if (s.param_by_name.count(name))
    throw InvalidArgument("Recorder::param: a param named '" + name + "' already exists");
  if (!initial.defined())
    throw InvalidArgument("Recorder::param: param '" + name +
                          "' needs a defined array (got a default-constructed Array)");
  if (!initial.is_contiguous())
    throw InvalidArgument("Recorder::param: param '" + name + "' must be contiguous");
  s.check_distinct_memory(initial, "param '" + name + "'");
  Transaction t(s);
  const int b = s.new_buffer(BufferKind::param, initial.shape(), initial.dtype(), name);
  s.arrays[static_cast<std::size_t>(b)] = initial;
  s.param_names.push_back(name);
  s.param_by_name[name] = b;
  s.remember_caller_memory(initial, b);
  Value v = s.handle(s.new_value(b, 0, initial.shape(), initial.dtype()));
  t.commit();
  return v;
}

Value Recorder::external(const Array& array, const std::string& label) {
  Recording::State& s = *rec_->s_;
  s.check_open("Recorder::external");
  if (label.empty()) throw InvalidArgument("Recorder::external: label must not be empty");
  if (!array.defined())
    throw InvalidArgument("Recorder::external: '" + label +
                          "' needs a defined array (got a default-constructed Array)");
  if (!array.is_contiguous())
    throw InvalidArgument("Recorder::external: '" + label + "' must be contiguous");
  s.check_distinct_memory(array, "external array '" + label + "'");
  Transaction t(s);
  const int b = s.new_buffer(BufferKind::external, array.shape(), array.dtype(), label);
  s.arrays[static_cast<std::size_t>(b)] = array;
  s.remember_caller_memory(array, b);
  Value v = s.handle(s.new_value(b, 0, array.shape(), array.dtype()));
  t.commit();
  return v;
}

Value Recorder::empty(const Shape& shape, DType dtype, const std::string& label) {
  Recording::State& s = *rec_->s_;
  s.check_open("Recorder::empty");
  checked_nbytes(shape, dtype, "Recorder::empty");
  Transaction t(s);
  const int b = s.new_buffer(BufferKind::internal, shape, dtype,
                             label.empty() ? "empty#" + std::to_string(s.buffers.size()) : label);
  s.labeled[static_cast<std::size_t>(b)] = !label.empty();
  Value v = s.handle(s.new_value(b, 0, shape, dtype));
  t.commit();
  return v;
}

}  // namespace eagle
