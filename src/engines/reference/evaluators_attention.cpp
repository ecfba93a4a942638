// Evaluators of the captured ops: scaled dot-product attention (THD or dense) and the gated
// delta-rule linear attentions.
#include <cmath>

#include "eagle/core/error.hpp"
#include "engines/reference/dense_io.hpp"
#include "engines/reference/evaluators.hpp"
#include "engines/reference/math/linear_attention.hpp"
#include "engines/reference/math/sdpa.hpp"

namespace eagle::reference {

namespace {

// A dense [B, S, heads, dim] tensor viewed as THD [B*S, heads, dim] (the same memory order).
Dense as_thd(const Dense& x) {
  if (x.dims.size() != 4) return x;
  Dense out = x;
  out.dims = {x.dims[0] * x.dims[1], x.dims[2], x.dims[3]};
  return out;
}

// Dense statistics [B, S, heads] viewed as THD [B*S, heads]; THD statistics stay as they are.
Dense stats_as_thd(const op::Node& node, const Dense& x) {
  if (node.input("q").dims().size() != 4 || x.dims.size() != 3) return x;
  Dense out = x;
  out.dims = {x.dims[0] * x.dims[1], x.dims[2]};
  return out;
}

// Relabels a THD result back to the dims the node declared.
void store_as(const op::Node& node, Env& env, const char* port, Dense value) {
  const op::Tensor t = node.output(port);
  if (!t.defined()) return;
  value.dims = t.dims();
  store(node, env, port, std::move(value));
}

std::vector<int64_t> uniform_cu(int64_t batch, int64_t len) {
  std::vector<int64_t> cu(static_cast<std::size_t>(batch + 1));
  for (int64_t b = 0; b <= batch; ++b) cu[b] = b * len;
  return cu;
}

// The cumulative sequence lengths at `port`, read exactly, each entry checked to lie in
// [0, rows]: it counts rows of `of`, which has `rows`. (The math then checks the order.)
std::vector<int64_t> cu_seqlens(const op::Node& node, const Env& env, const char* port,
                                const char* of, int64_t rows) {
  std::vector<int64_t> cu = as_integers(input(node, env, port));
  for (std::size_t i = 0; i < cu.size(); ++i)
    if (cu[i] < 0 || cu[i] > rows)
      throw InvalidArgument(node.name() + ": " + port + " '" + node.input(port).name() +
                            "' entry " + std::to_string(i) + " = " + std::to_string(cu[i]) +
                            " is outside [0, " + std::to_string(rows) +
                            "]: cumulative sequence lengths count rows of " + of + " (" +
                            std::to_string(rows) + " rows)");
  return cu;
}

// The tensor at `port`, an input or an output of the node, or an undefined Tensor.
op::Tensor port_tensor(const op::Node& node, const char* port) {
  const op::Tensor t = node.input(port);
  return t.defined() ? t : node.output(port);
}

// Row starts of a packed tensor's sequences: its ragged offset (element offsets of each
// sequence's first row) when it has one, else the cumulative lengths.
std::vector<int64_t> row_starts(const op::Node& node, const Env& env, const char* port,
                                const std::vector<int64_t>& cu) {
  const op::Tensor t = port_tensor(node, port);
  const op::Tensor ragged = t.ragged_offset();
  if (!ragged.defined()) return {cu.begin(), cu.end() - 1};
  const std::vector<int64_t> offsets = as_integers(env.values[ragged.index()]);
  int64_t row = 1;  // elements per row: [T, heads, dim] or statistics [T, heads]
  for (std::size_t i = 1; i < t.dims().size(); ++i) row *= t.dims()[i];
  const int64_t elements = row * (t.dims().empty() ? 1 : t.dims()[0]);
  if (offsets.size() != cu.size())
    throw InvalidArgument(node.name() + ": ragged offset of '" + port + "' has " +
                          std::to_string(offsets.size()) + " entries; cu_seqlens has " +
                          std::to_string(cu.size()));
  std::vector<int64_t> starts;
  for (std::size_t b = 0; b + 1 < offsets.size(); ++b) {
    if (offsets[b] < 0 || offsets[b] > elements)
      throw InvalidArgument(node.name() + ": ragged offset '" + ragged.name() + "' of '" + port +
                            "' entry " + std::to_string(b) + " = " + std::to_string(offsets[b]) +
                            " is outside [0, " + std::to_string(elements) +
                            "]: element offsets into '" + t.name() + "' (" +
                            std::to_string(elements) + " elements)");
    if (row == 0 || offsets[b] % row != 0)
      throw InvalidArgument(node.name() + ": ragged offset of '" + port + "' entry " +
                            std::to_string(b) + " = " + std::to_string(offsets[b]) +
                            " is not a multiple of a row (" + std::to_string(row) + " elements)");
    starts.push_back(offsets[b] / row);
  }
  return starts;
}

// The math reads and writes every tensor at its anchor's rows (q's for o, stats, d_o and dq;
// k's for v, dk and dv): a tensor without a ragged offset follows its anchor, and one whose own
// ragged offset places it elsewhere is refused rather than silently read or written at the
// anchor's rows.
void expect_anchor_rows(const op::Node& node, const Env& env, const char* port,
                        const std::vector<int64_t>& cu, const std::vector<int64_t>& starts,
                        const char* anchor) {
  const op::Tensor t = port_tensor(node, port);
  if (!t.defined() || !t.ragged_offset().defined()) return;
  if (row_starts(node, env, port, cu) != starts)
    throw InvalidArgument(node.name() + ": " + port +
                          "'s ragged offset must place sequences where " + anchor + "'s does");
}

// FlashAttention's max_seqlen contract (attribute `attr`, 0: none): each sequence of `cu` has at
// most that many rows. Engines may size their grids by it, so a longer one is refused here.
void expect_max_seqlen(const op::Node& node, const char* attr, const char* port,
                       const std::vector<int64_t>& cu) {
  const int64_t bound = node.attr(attr).as_int(attr);
  if (bound <= 0) return;
  for (std::size_t b = 0; b + 1 < cu.size(); ++b)
    if (cu[b + 1] - cu[b] > bound)
      throw InvalidArgument(node.name() + ": sequence " + std::to_string(b) + " of " + port +
                            " has " + std::to_string(cu[b + 1] - cu[b]) + " rows, over " + attr +
                            " = " + std::to_string(bound) +
                            " (every sequence must have at most that many)");
}

SdpaSequences sdpa_sequences(const op::Node& node, const Env& env) {
  const op::Dims& q = node.input("q").dims();
  const op::Dims& k = node.input("k").dims();
  if (q.size() == 4) {  // dense: every sequence full length
    return sequences_from_cu_seqlens(uniform_cu(q[0], q[1]), uniform_cu(k[0], k[1]));
  }
  const auto cu_q = cu_seqlens(node, env, "cu_seqlens_q", "q", q[0]);
  const auto cu_kv = cu_seqlens(node, env, "cu_seqlens_kv", "k", k[0]);
  expect_max_seqlen(node, "max_seqlen_q", "cu_seqlens_q", cu_q);
  expect_max_seqlen(node, "max_seqlen_kv", "cu_seqlens_kv", cu_kv);
  SdpaSequences s = sequences_from_cu_seqlens(cu_q, cu_kv);
  s.q_start = row_starts(node, env, "q", cu_q);
  s.kv_start = row_starts(node, env, "k", cu_kv);
  for (const char* port : {"o", "stats", "d_o", "dq"})
    expect_anchor_rows(node, env, port, cu_q, s.q_start, "q");
  for (const char* port : {"v", "dk", "dv"})
    expect_anchor_rows(node, env, port, cu_kv, s.kv_start, "k");
  return s;
}

SdpaOptions sdpa_options(const op::Node& node) {
  const double d = static_cast<double>(node.input("q").dims().back());
  return {real_attr(node, "scale", 1.0 / std::sqrt(d)), node.attr("causal").as_bool("causal")};
}

void eval_sdpa(const op::Node& node, Env& env) {
  SdpaForward r =
      sdpa_forward(as_thd(input(node, env, "q")), as_thd(input(node, env, "k")),
                   as_thd(input(node, env, "v")), sdpa_sequences(node, env), sdpa_options(node));
  store_as(node, env, "o", std::move(r.o));
  store_as(node, env, "stats", std::move(r.lse));
}

void eval_sdpa_bwd(const op::Node& node, Env& env) {
  SdpaBackward r = sdpa_backward(
      as_thd(input(node, env, "q")), as_thd(input(node, env, "k")), as_thd(input(node, env, "v")),
      as_thd(input(node, env, "o")), stats_as_thd(node, input(node, env, "stats")),
      as_thd(input(node, env, "d_o")), sdpa_sequences(node, env), sdpa_options(node));
  store_as(node, env, "dq", std::move(r.dq));
  store_as(node, env, "dk", std::move(r.dk));
  store_as(node, env, "dv", std::move(r.dv));
}

struct DeltaCall {
  DeltaInputs in;
  DeltaOptions opt;
};

DeltaCall delta_call(const op::Node& node, const Env& env) {
  DeltaCall c;
  c.in.q = &input(node, env, "q");
  c.in.k = &input(node, env, "k");
  c.in.v = &input(node, env, "v");
  c.in.g = &input(node, env, "g");
  c.in.beta = optional_input(node, env, "beta");  // gdn, kda
  c.in.b = optional_input(node, env, "b");        // gdn2
  c.in.w = optional_input(node, env, "w");        // gdn2
  c.in.initial_state = optional_input(node, env, "initial_state");
  c.in.a_log = optional_input(node, env, "a_log");
  c.in.dt_bias = optional_input(node, env, "dt_bias");
  c.in.cu_seqlens = cu_seqlens(node, env, "cu_seqlens", "q", node.input("q").dims()[0]);
  const double k = static_cast<double>(node.input("q").dims().back());
  c.opt.scale = real_attr(node, "scale", 1.0 / std::sqrt(k));
  c.opt.use_qk_l2norm = node.flag("use_qk_l2norm");
  c.opt.safe_gate = node.flag("safe_gate");
  c.opt.use_beta_sigmoid = node.flag("use_beta_sigmoid");
  return c;
}

template <DeltaRule R>
void eval_delta(const op::Node& node, Env& env) {
  const DeltaCall c = delta_call(node, env);
  DeltaForward r = delta_forward(R, c.in, c.opt);
  store(node, env, "o", std::move(r.o));
  store(node, env, "final_state", std::move(r.final_state));
}

template <DeltaRule R>
void eval_delta_bwd(const op::Node& node, Env& env) {
  const DeltaCall c = delta_call(node, env);
  DeltaBackward r = delta_backward(R, c.in, input(node, env, "d_o"),
                                   optional_input(node, env, "d_final_state"), c.opt);
  store(node, env, "dq", std::move(r.dq));
  store(node, env, "dk", std::move(r.dk));
  store(node, env, "dv", std::move(r.dv));
  store(node, env, "dg", std::move(r.dg));
  store(node, env, "dbeta", std::move(r.dbeta));
  store(node, env, "db", std::move(r.db));
  store(node, env, "dw", std::move(r.dw));
  store(node, env, "d_initial_state", std::move(r.d_initial_state));
  store(node, env, "d_a_log", std::move(r.d_a_log));
  store(node, env, "d_dt_bias", std::move(r.d_dt_bias));
}

}  // namespace

Eval attention_evaluator(const std::string& op) {
  if (op == "sdpa") return &eval_sdpa;
  if (op == "sdpa_bwd") return &eval_sdpa_bwd;
  if (op == "gdn") return &eval_delta<DeltaRule::gdn>;
  if (op == "gdn_bwd") return &eval_delta_bwd<DeltaRule::gdn>;
  if (op == "kda") return &eval_delta<DeltaRule::kda>;
  if (op == "kda_bwd") return &eval_delta_bwd<DeltaRule::kda>;
  if (op == "gdn2") return &eval_delta<DeltaRule::gdn2>;
  if (op == "gdn2_bwd") return &eval_delta_bwd<DeltaRule::gdn2>;
  return nullptr;
}

}  // namespace eagle::reference
