#include "engines/analyzers.hpp"

#include <algorithm>

#include "eagle/ragged/capacity.hpp"

namespace eagle::engines {

namespace {
bool declared_row_major(const op::Tensor& t) {
  int64_t expect = 1;
  for (std::size_t i = t.dims().size(); i-- > 0;) {
    if (t.dims()[i] != 1 && t.strides()[i] != expect) return false;
    expect *= t.dims()[i];
  }
  return true;
}
std::string yes(bool b) {
  return b ? "yes" : "no";
}
}  // namespace

std::string PointwiseFacts::describe() const {
  return Facts::describe() + ", single node " + yes(single_node) + ", same dims " + yes(same_dims) +
         ", uniform dtype " + yes(uniform_dtype) + ", row-major " + yes(row_major) + ", " +
         std::to_string(numel) + " elements";
}

std::shared_ptr<const plan::Facts> analyze_pointwise(const op::Graph& graph) {
  auto f = std::make_shared<PointwiseFacts>();
  plan::describe_graph(graph, *f);
  const auto nodes = graph.nodes();
  f->single_node = nodes.size() == 1;
  if (!f->single_node) return f;
  const op::Node& n = nodes[0];
  f->op = n.op();
  const auto inputs = n.inputs();
  const auto outputs = n.outputs();
  f->arity = static_cast<int>(inputs.size());
  if (outputs.size() != 1) return f;
  const op::Tensor& out = outputs[0].second;
  f->numel = 1;
  for (int64_t d : out.dims()) f->numel *= d;
  f->same_dims = f->uniform_dtype = f->row_major = true;
  for (const auto& p : inputs) {
    f->same_dims = f->same_dims && p.second.dims() == out.dims();
    f->uniform_dtype = f->uniform_dtype && p.second.dtype() == out.dtype();
    f->row_major = f->row_major && declared_row_major(p.second);
  }
  f->row_major = f->row_major && declared_row_major(out);
  return f;
}

std::string AttentionFacts::describe() const {
  return Facts::describe() + ", " + (packed ? "THD" : "dense") + ", heads " +
         std::to_string(heads) + "/" + std::to_string(kv_heads) + ", dims " +
         std::to_string(head_dim) + "/" + std::to_string(value_dim) + ", causal " + yes(causal) +
         ", ragged offsets " + yes(ragged_offsets) + ", rows " + std::to_string(rows) + ", slots " +
         std::to_string(slots) + ", grid ratio " + std::to_string(grid_ratio);
}

std::shared_ptr<const plan::Facts> analyze_attention(const op::Graph& graph) {
  auto f = std::make_shared<AttentionFacts>();
  plan::describe_graph(graph, *f);
  const auto nodes = graph.nodes();
  f->single_node = nodes.size() == 1;
  for (const op::Node& n : nodes) {
    if (n.op() != "sdpa" && n.op() != "sdpa_bwd") continue;
    const op::Tensor q = n.input("q"), k = n.input("k"), v = n.input("v");
    const std::size_t r = q.dims().size();
    f->packed = n.input("cu_seqlens_q").defined();
    f->heads = q.dims()[r - 2];
    f->kv_heads = k.dims()[r - 2];
    f->head_dim = q.dims()[r - 1];
    f->value_dim = v.dims()[r - 1];
    f->causal = n.attr("causal").as_bool("causal");
    f->backward = n.op() == "sdpa_bwd";
    for (const op::Tensor& t : {q, k, v}) f->ragged_offsets |= t.ragged_offset().defined();
    f->rows = q.dims()[f->packed ? 0 : 1];
    f->slots = f->packed ? n.input("cu_seqlens_q").dims()[0] - 1 : q.dims()[0];
    if (f->packed && f->rows > 0 && f->slots > 0) {
      constexpr int64_t kTile = 128;
      const int64_t tiles = (f->rows + kTile - 1) / kTile;  // ceil(T / 128)
      const double rect = static_cast<double>(f->slots) * static_cast<double>(tiles);
      f->grid_ratio = rect / static_cast<double>(ragged::chunk_capacity(f->rows, f->slots, kTile));
    }
    break;
  }
  return f;
}

std::string DeltaFacts::describe() const {
  return Facts::describe() + ", rule " + rule + ", heads " + std::to_string(heads) + "/" +
         std::to_string(value_heads) + ", K " + std::to_string(key_dim) + ", V " +
         std::to_string(value_dim) + ", initial state " + yes(has_initial_state) + ", l2norm " +
         yes(use_qk_l2norm) + ", safe gate " + yes(safe_gate);
}

std::shared_ptr<const plan::Facts> analyze_delta(const op::Graph& graph) {
  auto f = std::make_shared<DeltaFacts>();
  plan::describe_graph(graph, *f);
  const auto nodes = graph.nodes();
  f->single_node = nodes.size() == 1;
  for (const op::Node& n : nodes) {
    std::string rule = n.op();
    if (rule.size() > 4 && rule.substr(rule.size() - 4) == "_bwd") rule.resize(rule.size() - 4);
    if (rule != "gdn" && rule != "kda" && rule != "gdn2") continue;
    f->rule = rule;
    f->heads = n.input("q").dims()[1];
    f->key_dim = n.input("q").dims()[2];
    f->value_heads = n.input("v").dims()[1];
    f->value_dim = n.input("v").dims()[2];
    f->has_initial_state = n.input("initial_state").defined();
    f->use_qk_l2norm = n.attr("use_qk_l2norm").as_bool("use_qk_l2norm");
    f->safe_gate = n.flag("safe_gate");
    break;
  }
  return f;
}

}  // namespace eagle::engines
