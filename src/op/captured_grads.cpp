// Derivative rules of the captured ops: sdpa through sdpa_bwd (the forward's o and logsumexp
// when it outputs both, else both recomputed), gdn, kda and gdn2 through their _bwd ops (which
// recompute the forward states themselves).
#include <string>
#include <utility>
#include <vector>

#include "eagle/core/shape.hpp"
#include "op/grad_context.hpp"
#include "op/tables.hpp"

namespace eagle::op::detail {

void sdpa_grad(GradContext& c) {
  const Node& n = c.node();
  if (n.output("stats").defined() && c.cot("stats").defined())
    c.refuse(
        "a cotangent flows into its output 'stats'; gradients through the logsumexp are "
        "not done (differentiate o only)");
  if (!c.wants("q") && !c.wants("k") && !c.wants("v")) return;
  const std::vector<Tensor> fwd = c.values({"o", "stats"});
  Ports ins = {{"q", c.value("q")}, {"k", c.value("k")}, {"v", c.value("v")},
               {"o", fwd[0]},       {"d_o", c.cot("o")}, {"stats", fwd[1]}};
  for (const char* p : {"cu_seqlens_q", "cu_seqlens_kv"})
    if (n.input(p).defined()) ins.emplace_back(p, c.value(p));
  Attrs attrs = {{"causal", n.attr("causal")},
                 {"max_seqlen_q", n.attr("max_seqlen_q")},
                 {"max_seqlen_kv", n.attr("max_seqlen_kv")}};
  if (n.has_attr("scale")) attrs.emplace_back("scale", n.attr("scale"));
  auto out = c.graph().op("sdpa_bwd", ins, attrs);
  for (const char* p : {"q", "k", "v"}) {
    Tensor g = out.at(std::string("d") + p);
    // A gradient takes its input's layout: q, k and v read as slices of one packed qkv array
    // get dq, dk and dv laid out the same way (a fused attention backward reads and writes
    // each pair alike; the caller provides such outputs where they lie).
    const Tensor in = n.input(p);
    const Dims& st = in.strides();
    if (!st.empty() && st != contiguous_strides(in.dims())) g.set_strides(st);
    c.grad(p, g);
  }
}

void delta_rule_grad(GradContext& c) {
  const Node& n = c.node();
  // Each gradient output of the _bwd op and the input it belongs to.
  static const std::vector<std::pair<std::string, std::string>> grads = {
      {"dq", "q"},          {"dk", "k"},
      {"dv", "v"},          {"dg", "g"},
      {"dbeta", "beta"},    {"db", "b"},
      {"dw", "w"},          {"d_initial_state", "initial_state"},
      {"d_a_log", "a_log"}, {"d_dt_bias", "dt_bias"}};
  bool any = false;
  for (const auto& [out, in] : grads) any = any || (n.input(in).defined() && c.wants(in));
  if (!any) return;
  Ports ins;
  for (const auto& [port, t] : n.inputs()) ins.emplace_back(port, c.value(port));
  const Tensor d_o = c.cot("o");
  const Tensor v = n.input("v");
  ins.emplace_back("d_o", d_o.defined() ? d_o : c.zeros(v.dims(), v.dtype()));
  if (n.output("final_state").defined())
    if (const Tensor d_final = c.cot("final_state"); d_final.defined())
      ins.emplace_back("d_final_state", d_final);
  Attrs attrs;
  for (const auto& [name, a] : n.attrs())
    if (name != "output_final_state") attrs.emplace_back(name, a);
  const auto out = c.graph().op(n.op() + "_bwd", ins, attrs);
  for (const auto& [o, in] : grads)
    if (out.count(o) && n.input(in).defined()) c.grad(in, out.at(o));
}

}  // namespace eagle::op::detail
