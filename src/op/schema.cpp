#include "eagle/op/schema.hpp"

#include "eagle/core/error.hpp"
#include "op/tables.hpp"

namespace eagle::op {

std::string_view op_kind_name(OpKind kind) {
  switch (kind) {
    case OpKind::pointwise:
      return "pointwise";
    case OpKind::structured:
      return "structured";
    case OpKind::captured:
      return "captured";
  }
  return "?";
}

std::string dims_str(const Dims& dims) {
  std::string out = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (i) out += ",";
    out += std::to_string(dims[i]);
  }
  return out + "]";
}

const TensorMeta& InferContext::in(const std::string& port) const {
  auto it = inputs.find(port);
  if (it == inputs.end()) throw InvalidArgument(op + ": input '" + port + "' is not wired");
  return it->second;
}

const Attr& InferContext::attr(const std::string& name) const {
  auto it = attrs.find(name);
  if (it == attrs.end()) throw InvalidArgument(op + ": attribute '" + name + "' is not set");
  return it->second;
}

void InferContext::fail(const std::string& port, const std::string& rule) const {
  std::string m = op;
  m += ": ";
  m += port;
  auto it = inputs.find(port);
  if (it != inputs.end()) {
    m += " dims ";
    m += dims_str(it->second.dims);
  }
  m += ": ";
  m += rule;
  throw InvalidArgument(m);
}

void InferContext::expect_rank(const std::string& port, std::size_t rank,
                               const std::string& layout) const {
  if (in(port).dims.size() != rank) fail(port, "expected " + layout);
}

void InferContext::expect_dims(const std::string& port, const Dims& dims,
                               const std::string& layout) const {
  if (in(port).dims != dims) fail(port, "expected " + layout + " = " + dims_str(dims));
}

const OpSchema* find_op(std::string_view op) {
  for (const OpSchema* s : all_ops())
    if (s->name == op) return s;
  return nullptr;
}

const std::vector<const OpSchema*>& all_ops() {
  static const std::vector<const OpSchema*> ops = [] {
    std::vector<const OpSchema*> out;
    for (const auto* table :
         {&detail::pointwise_ops(), &detail::structured_ops(), &detail::captured_ops()})
      for (const OpSchema& s : *table) out.push_back(&s);
    return out;
  }();
  return ops;
}

}  // namespace eagle::op
