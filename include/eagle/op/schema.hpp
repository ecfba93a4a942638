// The declarative op tables: one schema per operation, naming its ports, attributes,
// conditional outputs and shape rule. Every op a graph can hold comes from these tables.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "eagle/core/dtype.hpp"
#include "eagle/op/attr.hpp"

namespace eagle::op {

using Dims = std::vector<int64_t>;

// pointwise: one uniform table (a, b, cond ports; broadcasting); structured: one entry per op
// with its own ports; captured: large ops (attention, linear attention) with an explicit schema.
enum class OpKind : uint8_t { pointwise, structured, captured };
std::string_view op_kind_name(OpKind kind);

// Which dtypes a port accepts.
enum class DTypeClass : uint8_t { floating, integer, any };

struct InputPort {
  InputPort(std::string n, bool req = true, DTypeClass d = DTypeClass::floating)
      : name(std::move(n)), required(req), dtypes(d) {}
  std::string name;
  bool required;
  DTypeClass dtypes;
};

// An output exists always, when a boolean attribute is true, or when an input port is wired.
struct OutputPort {
  enum class When : uint8_t { always, attr_true, input_wired };
  OutputPort(std::string n, When w = When::always, std::string c = {})  // NOLINT
      : name(std::move(n)), when(w), condition(std::move(c)) {}
  OutputPort(const char* n) : OutputPort(std::string(n)) {}  // NOLINT
  std::string name;
  When when;
  std::string condition;  // the attribute or input port name
};

struct AttrSpec {
  AttrSpec(std::string n, AttrType t, std::optional<Attr> d = std::nullopt, bool req = false)
      : name(std::move(n)), type(t), default_value(std::move(d)), required(req) {}
  std::string name;
  AttrType type;
  std::optional<Attr> default_value;  // none: required, or derived by the op when absent (scale)
  bool required;
};

// What a shape rule sees and writes: wired inputs by port name, the node's attributes with
// defaults applied, and the outputs to fill (only those the node produces).
struct TensorMeta {
  Dims dims;
  DType dtype = DType::f32;
};
struct InferContext {
  std::string op;
  std::map<std::string, TensorMeta> inputs;
  std::map<std::string, Attr> attrs;
  std::map<std::string, TensorMeta> outputs;

  bool has(const std::string& port) const { return inputs.count(port) != 0; }
  const TensorMeta& in(const std::string& port) const;
  const Attr& attr(const std::string& name) const;
  // Throws InvalidArgument "<op>: <port> dims [..]: <rule>".
  [[noreturn]] void fail(const std::string& port, const std::string& rule) const;
  // Checks the rank of a wired input (fail() otherwise).
  void expect_rank(const std::string& port, std::size_t rank, const std::string& layout) const;
  // Checks a wired input's dims equal `dims` (fail() otherwise, naming `layout`).
  void expect_dims(const std::string& port, const Dims& dims, const std::string& layout) const;
};
using InferFn = void (*)(InferContext& ctx);

// The derivative rule of an op: given one forward node, it adds to the backward graph the
// vector-Jacobian product of the node (eagle/op/backward.hpp builds backward graphs with it).
class GradContext;
using GradFn = void (*)(GradContext& ctx);

struct OpSchema {
  std::string name;
  OpKind kind;
  std::vector<InputPort> inputs;  // in positional order
  std::vector<OutputPort> outputs;
  std::vector<AttrSpec> attrs;
  InferFn infer;
  std::string doc;  // one line: what it computes
  // The shape rule in words (what `infer` checks and yields), for people: `eagle ops NAME`.
  std::string shape_rule;
  // The derivative rule, or nullptr: the op does not differentiate (its outputs are integers or
  // booleans, or it has no rule; op::backward refuses it on a differentiated path).
  GradFn grad;
};

// The schema of `op`, or nullptr.
const OpSchema* find_op(std::string_view op);
// Every op of the tables, pointwise first, then structured, then captured.
const std::vector<const OpSchema*>& all_ops();

}  // namespace eagle::op
