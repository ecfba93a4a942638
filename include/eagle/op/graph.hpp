// The operation IR: a graph of Tensors and Nodes (op, named ports, attributes), built from the
// op tables, fully introspectable. Planning freezes it: afterwards every mutation throws and
// every inspection still works.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "eagle/core/dtype.hpp"
#include "eagle/op/attr.hpp"
#include "eagle/op/schema.hpp"

namespace eagle::op {

struct GraphState;

// A tensor of one graph (a handle; copies refer to the same tensor). A default-constructed
// Tensor is undefined: every accessor and setter on it throws InvalidArgument.
class Tensor {
 public:
  Tensor() = default;
  bool defined() const { return state_ != nullptr; }
  int64_t uid() const;
  bool uid_assigned_by_user() const;
  const std::string& name() const;
  DType dtype() const;
  const Dims& dims() const;
  const Dims& strides() const;  // in elements; row-major unless set
  // Virtual: an intermediate the plan keeps to itself; the caller passes no buffer for it.
  // Inputs are never virtual; op outputs start virtual until set_output(true).
  bool is_virtual() const;
  // The tensor holding the element offset of each sequence's first row ([B+1] integers), for a
  // ragged (THD) tensor whose sequences sit at arbitrary places; undefined when it has none.
  Tensor ragged_offset() const;
  // The node that writes it, or -1 for a graph input.
  int producer() const;

  // Mutations (each throws InvalidArgument on a frozen graph, or on a bad value).
  // A user uid takes the number from an auto-assigned holder (renumbered); it collides with
  // another user uid -> InvalidArgument. Automatic uids are one past the largest uid, or the
  // smallest free uid >= 1 once a user took INT64_MAX.
  // Dims and strides must keep element counts and byte offsets within int64. An op output's
  // strides must give every element its own address (no stride 0 on a dim of size > 1, no
  // overlap); a graph input may broadcast with stride 0.
  Tensor& set_uid(int64_t uid);
  Tensor& set_name(const std::string& name);
  Tensor& set_dtype(DType dtype);
  Tensor& set_dims(const Dims& dims);
  Tensor& set_strides(const Dims& strides);
  Tensor& set_output(bool is_output);  // an output the caller receives (not virtual)
  Tensor& set_ragged_offset(const Tensor& offsets);

  friend bool operator==(const Tensor& a, const Tensor& b) {
    return a.state_ == b.state_ && a.index_ == b.index_;
  }
  int index() const { return index_; }  // position in Graph::tensors()

 private:
  friend class Graph;
  friend class Node;
  Tensor(std::shared_ptr<GraphState> s, int i) : state_(std::move(s)), index_(i) {}
  std::shared_ptr<GraphState> state_;
  int index_ = -1;
};

using Ports = std::vector<std::pair<std::string, Tensor>>;
using Attrs = std::vector<std::pair<std::string, Attr>>;

// A node of one graph (a handle).
class Node {
 public:
  const OpSchema& schema() const;
  const std::string& op() const { return schema().name; }
  const std::string& name() const;
  // Wired ports in schema order (unwired optional inputs and absent outputs are not listed).
  Ports inputs() const;
  Ports outputs() const;
  // The input or output at `port`, or an undefined Tensor.
  Tensor input(const std::string& port) const;
  Tensor output(const std::string& port) const;
  // Attributes as set, plus defaults for those not set.
  const std::map<std::string, Attr>& attrs() const;
  const Attr& attr(const std::string& name) const;  // InvalidArgument when absent
  bool has_attr(const std::string& name) const;
  // A boolean attribute's value; false when the node has none of that name.
  bool flag(const std::string& name) const;
  int index() const { return index_; }

 private:
  friend class Graph;
  Node(std::shared_ptr<GraphState> s, int i) : state_(std::move(s)), index_(i) {}
  std::shared_ptr<GraphState> state_;
  int index_;
};

struct TensorSpec {
  std::string name;
  Dims dims;
  DType dtype = DType::f32;
  Dims strides = {};                // empty: row-major
  std::optional<int64_t> uid = {};  // empty: assigned automatically
};

class Graph {
 public:
  explicit Graph(std::string name = "graph");
  // A Graph is a handle: copies share one graph. Moving copies too, so a moved-from Graph still
  // refers to its graph instead of being a null handle.
  Graph(const Graph&) = default;
  Graph& operator=(const Graph&) = default;

  const std::string& name() const;
  // A graph input (not virtual). Throws InvalidArgument on bad dims or strides.
  Tensor tensor(const TensorSpec& spec);
  // Appends a node of `op` with inputs wired by port name and attributes by name; returns its
  // outputs by port name. Validates ports, dtypes and attributes and infers output dims and
  // dtypes; throws InvalidArgument naming the port or attribute and the rule, and then adds
  // nothing.
  std::map<std::string, Tensor> op(const std::string& op, const Ports& inputs,
                                   const Attrs& attrs = {}, const std::string& name = "");
  // Ergonomic forms of the same.
  Tensor pointwise(const std::string& op, const Tensor& a, const Attrs& attrs = {});
  Tensor pointwise(const std::string& op, const Tensor& a, const Tensor& b,
                   const Attrs& attrs = {});
  Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
  Tensor matmul(const Tensor& a, const Tensor& b, const Tensor& bias = {});

  // Checks the whole graph: every node against its schema again (user-set dims of outputs
  // included), uids unique, ragged offsets integer vectors of B+1 entries, every graph input
  // read by a node (or a ragged offset), dims and strides addressable, op outputs without
  // overlapping strides. Throws InvalidArgument naming the tensor or node and the rule.
  void validate() const;
  // A new, unfrozen and unplanned graph with the same tensors (uids included) and nodes: one
  // description planned once per device.
  Graph clone() const;
  // Seals the whole surface (planning does this). Idempotent.
  void freeze();
  bool frozen() const;
  // Planning is one-shot: the first call marks the graph; a second throws InvalidArgument
  // (switch plans with select_plan, or plan a new graph).
  void claim_for_planning(const std::string& who);

  std::vector<Tensor> tensors() const;
  std::vector<Node> nodes() const;
  Tensor tensor_by_uid(int64_t uid) const;  // InvalidArgument when none has it
  // Tensors the caller supplies a buffer for, by ascending uid: every non-virtual tensor and
  // every ragged offset tensor.
  std::vector<Tensor> operand_tensors() const;
  std::string to_json() const;

  // A value computed once per frozen graph and kept with it (facts): `key` identifies the
  // computation. Throws InvalidArgument on a graph that is not frozen (facts of a graph that can
  // still change would go stale).
  std::shared_ptr<const void> memo(const void* key,
                                   const std::function<std::shared_ptr<const void>()>& make) const;

  // Internal: a handle to tensor `index` of a graph's state.
  static Tensor tensor_handle(const std::shared_ptr<GraphState>& s, int index);

 private:
  std::shared_ptr<GraphState> state_;
};

}  // namespace eagle::op
