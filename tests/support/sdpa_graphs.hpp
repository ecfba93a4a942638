// One-node sdpa and sdpa_bwd graphs for the attention engines' tests (cuDNN, native): dense [B, S,
// H, D] or THD [T, H, D] with cu_seqlens (i32), every output marked an output.
#pragma once

#include <optional>

#include "eagle/eagle.hpp"

namespace eagle::test::sdpa {

struct SdpaShape {
  bool ragged = false;
  int64_t batch = 2;
  int64_t s_q = 8, s_kv = 8;  // dense: sequence lengths; THD: buffer rows of q and k
  int64_t heads = 4, kv_heads = 4, head_dim = 64, value_dim = 64;
  bool causal = false;
  bool stats = true;  // forward: generate_stats
  DType dtype = DType::f16;
  std::optional<double> scale;
  bool one_cu = false;  // THD self-attention: one cu_seqlens tensor on both ports
  int64_t max_seqlen_q = 0, max_seqlen_kv = 0;  // THD: the op's bounds (0: none)
};

inline op::Dims qdims(const SdpaShape& s, int64_t heads, int64_t dim, bool kv) {
  const int64_t seq = kv ? s.s_kv : s.s_q;
  return s.ragged ? op::Dims{seq, heads, dim} : op::Dims{s.batch, seq, heads, dim};
}

inline op::Ports sdpa_inputs(op::Graph& g, const SdpaShape& s) {
  op::Ports p = {{"q", g.tensor({"q", qdims(s, s.heads, s.head_dim, false), s.dtype})},
                 {"k", g.tensor({"k", qdims(s, s.kv_heads, s.head_dim, true), s.dtype})},
                 {"v", g.tensor({"v", qdims(s, s.kv_heads, s.value_dim, true), s.dtype})}};
  if (s.ragged) {
    const op::Tensor cu_q = g.tensor({"cu_q", {s.batch + 1}, DType::i32});
    p.emplace_back("cu_seqlens_q", cu_q);
    p.emplace_back("cu_seqlens_kv",
                   s.one_cu ? cu_q : g.tensor({"cu_kv", {s.batch + 1}, DType::i32}));
  }
  return p;
}

inline op::Attrs sdpa_attrs(const SdpaShape& s, bool forward) {
  op::Attrs a = {{"causal", s.causal}};
  if (forward) a.emplace_back("generate_stats", s.stats);
  if (s.scale) a.emplace_back("scale", *s.scale);
  if (s.max_seqlen_q > 0) a.emplace_back("max_seqlen_q", s.max_seqlen_q);
  if (s.max_seqlen_kv > 0) a.emplace_back("max_seqlen_kv", s.max_seqlen_kv);
  return a;
}

inline op::Graph sdpa_graph(const SdpaShape& s) {
  op::Graph g("sdpa");
  for (auto& [port, t] : g.op("sdpa", sdpa_inputs(g, s), sdpa_attrs(s, true))) t.set_output(true);
  return g;
}

inline op::Graph sdpa_bwd_graph(const SdpaShape& s) {
  op::Graph g("sdpa_bwd");
  op::Ports p = sdpa_inputs(g, s);
  const op::Dims o = qdims(s, s.heads, s.value_dim, false);
  op::Dims stats = o;
  stats.pop_back();
  p.emplace_back("o", g.tensor({"o", o, s.dtype}));
  p.emplace_back("d_o", g.tensor({"d_o", o, s.dtype}));
  p.emplace_back("stats", g.tensor({"stats", stats, DType::f32}));
  for (auto& [port, t] : g.op("sdpa_bwd", p, sdpa_attrs(s, false))) t.set_output(true);
  return g;
}

}  // namespace eagle::test::sdpa
